"""The code sandbox: programs run against their tests in isolated processes.

    runner              run_job(job, limits): starts the harness under bubblewrap (namespaces,
                        pivot_root into the standard library, a fresh uid as root, rlimits, a memory
                        cgroup), collects its per-test records, enforces the wall deadlines
    seccomp_filter      the seccomp filter bubblewrap loads (built with libseccomp via pyseccomp)
    memory_cgroup       the per-item memory cgroup (cgroup v2), when the machine allows one
    code_harness        the program that runs INSIDE the sandbox (standalone, stdlib only)
    code_harness_modes  the harness's test modes (standard input/output, function calls, check programs)
    code_values         the exact-builtin encoding of return values (inside: encode; parent: decode)
    code_tests          test formats (parse_tests) and the parent's comparisons of the records

`code_harness`, `code_harness_modes` and `code_values` run inside the sandbox as top-level modules,
compiled by the parent and handed over in the job's memfd (no file of resrl is visible inside);
nothing here is imported by this package's `__init__`.
"""
