"""The bound sources of the exact tier: lower bounds on the step time of every plan."""
