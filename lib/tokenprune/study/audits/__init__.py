"""One module per notebook: the audit of one paper (its profile table, the experiments behind its tables,
and its claims declared with rules of :mod:`tokenprune.study.verdicts`)."""
