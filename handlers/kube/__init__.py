"""Kubernetes semantics in plain Python: selectors, quantities, requests, taints."""
