"""Linear models and the MILP solvers that load them (SCIP, HiGHS, CBC)."""
