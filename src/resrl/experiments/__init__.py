"""Experiments: plans of jobs over the library's own parts (a warm start, `resrl.train`, the
evaluators of `resrl.eval`, the tables of `resrl.statistics`), run by one job runner.

    jobs       run_jobs (parallel, resumable CLI steps), available_cpus, default_workers
    layout     run directories, done-markers, the handoff between processes
    workers    run_methods: each method's run in this process or as worker processes
    kinds      the experiment kinds a demo task is run by: `demo` (supervised), `steps` (agents)
    warmstart  the one supervised loop (warm start on targets, behaviour cloning from an expert)
    seeds      one process per seed, then means, intervals and paired differences
    grid       each method's settings chosen on a dev split
    command    `resrl demo`;  compare: `resrl compare`
"""
