"""The sentinel's detectors: what is wrong with one object now (``detectors.py``), and what
Prometheus says is wrong, polled on the sentinel's timer (``polled.py``). Importing the
package registers them all."""

import handlers.sentinel.detectors
import handlers.sentinel.polled  # noqa: F401
