"""The paper and the analyses, apart from the library.

Built on the library's public parts (instances, plans, the evaluator, the solver registry,
compare, plot) and never imported by them: :mod:`.reproduce` (the SlackSwap paper's
figures and tables with a report), :mod:`.sensitivity` (section 4.5's sweeps: link
bandwidth, sequence length, GPU generation), :mod:`.schedule` and :mod:`.best_schedule`
(the schedules a plan's decisions admit, and the fastest of them) and :mod:`.runtime_gap`
(how much of a plan's step is lost to the runtime rather than to its decisions). The
command line reaches them through ``slackopt reproduce`` and ``slackopt simulate
--best-schedule``.
"""
