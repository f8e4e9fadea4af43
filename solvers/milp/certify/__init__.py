"""Certification: bounds that floating point cannot lift, and the reading of a run for the
plan-by-plan soundness checks."""
