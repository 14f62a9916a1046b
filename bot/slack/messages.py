"""Every short message gpubot sends a user (ephemeral, mrkdwn), in one place.

Values from the user or the cluster go through ``code``/``escape``: nothing they contain
can mention anyone or format the message.
"""

from __future__ import annotations

from bot.slack.mrkdwn import code, escape


def diagnosing(line: str, source: str) -> str:
    return f":hourglass_flowing_sand: Diagnosing {code(line)} on {escape(source)} ..."


def rechecking(line: str) -> str:
    return f":arrows_counterclockwise: Re-checking {code(line)} ..."


def usage(command: str, problem: str, example: str) -> str:
    """``problem`` is already mrkdwn-safe (``CommandError`` messages are)."""
    first = example.split("  ·  ")[0]
    return (f":warning: {problem}\nTry: {code(f'{command} {first}')}  ·  "
            f"{code(f'{command} help')} lists every command.")


def rate_limited(limit: int, wait: float) -> str:
    return (f":snail: You have run {limit} commands in the last minute, the most gpubot "
            f"takes from one person. Please try again in {max(1, round(wait))} s.")


def busy(queued: int) -> str:
    return (f":construction: gpubot is busy: {queued} diagnoses are waiting already. "
            "Please try again in a minute.")


def timed_out(line: str, seconds: float, doing: str, source: str) -> str:
    return (f":stopwatch: {code(line)} timed out after {seconds:g} s while "
            f"{escape(doing)} ({escape(source)}). The cluster's API server is slow or not "
            "answering; other commands are not held up by it. Try again later, or ask the "
            "bot's admins to raise GPUBOT_DEADLINE.")


def failed(line: str, error: str) -> str:
    return f":x: {code(line)}: {escape(error)}"


def internal_error(line: str) -> str:
    return (f":x: {code(line)} failed inside gpubot. The error is in the bot's log; "
            "please tell its admins.")


def cannot_post(error: str) -> str:
    hint = ""
    if error in ("not_in_channel", "channel_not_found"):
        hint = " Invite me to this channel (`/invite @gpubot`) to get the card and its proof here."
    return f":warning: I could not post the answer in this channel ({escape(error)}).{hint}"


def no_chart(why: str) -> str:
    """``nodes`` without the chart extra: the table stands, the picture is one install away."""
    return f":bar_chart: No chart with this answer: {escape(why)} (the container image has it)."


def approvals_disabled(label: str) -> str:
    return (f":lock: Approvals are not enabled yet: {code(label)} was not run. Copy the "
            "command from the card's thread to do it by hand.")


def bad_button() -> str:
    return (":warning: This button is from an older gpubot and cannot be read. "
            "Run the command again.")
