"""Experiments: plans of jobs over the library's own parts (a warm start, `resrl.train`, the
evaluators of `resrl.eval`, the tables of `resrl.statistics`), run by one job runner.

    jobs       run_jobs (parallel, resumable CLI steps), available_cpus, default_workers
    layout     run directories, done-markers, the handoff between processes
    workers    run_methods: each method's run in this process or as worker processes
    pipeline   run_experiment: the one pipeline of `resrl demo`, for every kind
    kinds      the experiment kinds a demo task is run by (what differs: the start, the evaluation,
               the report): supervised, steps (agents), pretrained
    method     the one-method toolkit: training config, train (checkpointed, resumable), evaluate, reuse
    present    console, reports, plots, the ω analysis
    warmstart  the one supervised loop (warm start on targets, behaviour cloning from an expert)
    seeds      one process per seed, then means, intervals and paired differences
    grid       each method's settings chosen on a dev split
    command    `resrl demo`;  compare: `resrl compare`
"""
