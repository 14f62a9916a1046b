"""A fake Slack for tests: the Web API over real HTTP on 127.0.0.1, recording every call.

    with FakeSlack() as slack:
        client = WebClient(token="xoxb-test", base_url=slack.api_url)
        ...
        slack.wait_for("chat.postMessage")            # polls the record
        slack.calls("chat.update")[0].params["ts"]
        slack.rate_limit("chat.postMessage", times=1, retry_after=1)   # 429 + Retry-After
        slack.fail("chat.postMessage", "not_in_channel", times=1)
        slack.response_url("T1")                      # where respond() posts land
        slack.socket.send({...})                      # Socket Mode envelope (see socket.py)

Modelled on bolt-python's tests/mock_web_api_server: a recording HTTP server in a thread.
"""

from .server import Call, FakeSlack
from .signing import signed_headers

__all__ = ["Call", "FakeSlack", "signed_headers"]
