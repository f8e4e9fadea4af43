"""The search of the exact tier: the solver, its phases, and the searches that lower the plan."""
