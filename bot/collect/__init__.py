"""``gpubot snapshot``: what gpubot reads of a cluster, written as a snapshot it loads.

    plan.py        the kinds (every command's ``reads``), the pods whose logs are read,
                   what ``-n NS`` keeps from other namespaces
    collector.py   reading them through any ``ClusterView`` (the live reader: its timeouts,
                   pages, RBAC refusals), refusals recorded as not captured
    anonymize.py   ``--anonymize``: names replaced consistently, data-carrying fields dropped
    writer.py      the directory or ``.tgz`` layout ``bot.snapshot`` loads
    command.py     the CLI subcommand: arguments, checks of ``-o``, progress, summary
"""
