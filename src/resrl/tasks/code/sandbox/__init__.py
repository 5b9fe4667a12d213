"""The code sandbox: programs run against their tests in isolated processes.

    runner              run_job(job, limits): starts the harness under the isolation layers the
                        machine allows (namespaces, a fresh uid, rlimits, a memory cgroup), collects
                        its per-test records, enforces the wall deadlines
    memory_cgroup       the per-item memory cgroup (cgroup v2), when the machine allows one
    code_harness        the program that runs INSIDE the sandbox (standalone, stdlib only)
    code_harness_modes  the harness's test modes (standard input/output, function calls, check programs)
    code_values         the exact-builtin encoding of return values (inside: encode; parent: decode)
    code_tests          test formats (parse_tests) and the parent's comparisons of the records

`code_harness`, `code_harness_modes` and `code_values` are imported inside the sandbox as
top-level modules from this directory; nothing here is imported by this package's `__init__`.
"""
