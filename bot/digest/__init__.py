"""The daily digest: what the last day cost in GPUs, posted once a day (``gpubot serve``) or
printed (``gpubot digest``).

- ``build.py``: the sentinel's incidents (the store's open and archived ones) and a view
  into ``handlers/digest.py``'s report;
- ``schedule.py``: once a day at ``digest_time`` (UTC), on the leader only, the day recorded
  in the store so that a restart or a second replica does not post it twice;
- ``slack.py``: the card, its thread and the supply-and-demand chart in the digest channel;
- ``cli.py``: ``gpubot digest``.
"""
