"""Alertmanager webhooks -> one Slack card per alert group, the diagnosis in its thread.

    payload.py   parse and check the webhook body (version 4)
    mapping.py   alertname + labels -> the gpubot command that diagnoses it
    routing.py   which channel a group's card goes to
    threads.py   groupKey -> the card's message, in the store (survives restarts, shared)
    notifier.py  a bounded queue of groups, coalesced, posted under Slack's rate limits
    receiver.py  POST /alertmanager on the bot's HTTP server (bearer token, 1 MiB)
    silences.py  the card's Silence menu: an approver agrees, then a silence in Alertmanager
    alertmanager.py  Alertmanager's API v2 (POST /api/v2/silences)
"""
