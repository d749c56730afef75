"""Read-only consumers of MLflow: tables of a sweep's trials, repeat-group aggregates and selection (paper-style reports come later)."""
