"""The sentinel: the bot notices lost GPUs and stuck GPU work before anyone asks.

- ``watcher.py``: the detectors' observations (``handlers/sentinel``), kept current from
  the watch cache's changes;
- ``incidents.py``: incidents in the store, one per (detector, group);
- ``service.py``: the loop that turns lasting observations into incidents and hands their
  changes to a publisher (Slack threads, the CLI's printer).
"""
