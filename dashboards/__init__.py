"""Read-only consumers of MLflow: tables of a sweep's trials (paper-style reports come later)."""
