"""why-pending: the checks that explain a pending GPU workload, one module per family."""
