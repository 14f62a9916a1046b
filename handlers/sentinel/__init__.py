"""The sentinel's detectors: what is wrong with one object now (``detectors.py``)."""
