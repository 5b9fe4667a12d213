"""Task families: one package per family, each registered once in `resrl.tasks.registry`.

    resrl.tasks.math           Math-Verify ("math") and final-answer match ("exact") rewards
    resrl.tasks.code           code problems (HumanEval, HumanEval+, test rows), the sandboxed "code" reward
    resrl.tasks.reasoning_gym  rg:TASK procedural data and its "rg" reward (optional extra `rg`)
    resrl.tasks.tools          tool calling: rows, BFCL data, call parsing and matching, the rewards,
                               the BFCL multi-turn environment and its evaluation
    resrl.tasks.alfworld       ALFWorld-format household games: data, environment, generator,
                               evaluation (optional extra `agents`)

Nothing is imported here; `resrl.tasks.registry` imports a family's package on the first lookup.
"""
