"""How an experiment is shown: the console and its phases (`display`), the reports (`report`), the
plots (`plots`), the ω analysis of negative completions (`omega`)."""
