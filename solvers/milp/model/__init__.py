"""The time-indexed relaxation of the evaluator and the map from a run to its point."""
