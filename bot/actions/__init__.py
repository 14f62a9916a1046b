"""Approval-gated actions on the cluster: restart a node's device plugin, cordon, uncordon.

    cluster.py    the API calls they make (through bot.live's Transport; never a cache)
    units.py      each action as preflight / recheck / execute (dry run or real) / verify
    requests.py   the request record, the click-time rules, the runner, the audit trail

Slack is not imported here: ``bot/slack/approvals.py`` is the Slack side.
"""
