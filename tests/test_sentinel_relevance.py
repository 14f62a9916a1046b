"""The watcher's relevance answers (``bot/sentinel/watcher.py`` ``Answers``): the stack-down
detector skips a pod that is no GPU stack pod while its labels, containers and volumes are
the same objects (what the watch cache hands out after a status change); a change to any of
them asks again; a GPU stack pod's status changes are still evaluated; what is skipped
would have given no observation."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from bot.sentinel.watcher import Watcher
from handlers.sentinel.detectors import REGISTRY, Detector, Lookup, Observation, stack_down
from tests.test_sentinel import Objects, plugin_pod

Obj = dict[str, Any]
KEY = ("apps", "web-0")
PLUGIN = ("gpu-operator", "nvidia-device-plugin-daemonset-a-0")


def web_pod() -> Obj:
    return {"kind": "Pod", "metadata": {
        "name": "web-0", "namespace": "apps", "labels": {"app": "web"},
        "creationTimestamp": "2026-12-04T00:00:00Z"},
        "spec": {"nodeName": "a-0", "containers": [{"name": "web", "image": "nginx:1.27"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "web", "ready": True, "restartCount": 0,
                                          "state": {"running": {}}}]}}


def crash_looping(pod: Obj) -> Obj:
    """The pod after a status change alone: its metadata and spec the very same objects, as
    the watch cache shares an unchanged subtree with the object's previous version."""
    name = pod["spec"]["containers"][0]["name"]
    return {**pod, "status": {
        "phase": "Running", "conditions": [
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
             "lastTransitionTime": "2026-12-04T00:00:00Z"}],
        "containerStatuses": [{"name": name, "ready": False, "restartCount": 3,
                               "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}


class Counting:
    """The stack-down detector, counting the pods it is run on."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.detector: Detector = replace(REGISTRY["gpu-stack-down"], observe=self.observe)

    def observe(self, look: Lookup, pod: Obj) -> Observation | None:
        self.ran.append(pod["metadata"]["name"])
        return stack_down(look, pod)


def watching(view: Objects) -> tuple[Watcher, Counting]:
    counting = Counting()
    w = Watcher(view, [counting.detector])  # type: ignore[arg-type]  # get/list suffice
    w.scan()
    w.evaluate()
    return w, counting


def test_a_status_change_of_a_pod_that_is_no_gpu_stack_pod_is_skipped() -> None:
    view = Objects()
    view.put(web_pod())
    w, counting = watching(view)
    answers = w.answers["gpu-stack-down"]
    assert counting.ran == [] and answers.tests == 1  # asked once, at the first scan
    down = crash_looping(view.get("Pod", "web-0", "apps") or {})
    view.put(down)
    w.changed("Pod", *KEY)
    assert w.evaluate() == 1
    assert counting.ran == [] and answers.tests == 1  # the answer kept: not run, not asked
    assert stack_down(w._look, down) is None  # what the skip stands for
    assert w.seen["gpu-stack-down"] == {}


def test_a_gpu_stack_pods_status_change_is_still_evaluated() -> None:
    view = Objects()
    up = plugin_pod("a-0")
    up["status"] = web_pod()["status"]
    view.put(up)
    w, counting = watching(view)
    assert counting.ran == [up["metadata"]["name"]] and not w.seen["gpu-stack-down"]
    view.put(crash_looping(up))
    w.changed("Pod", *PLUGIN)
    w.evaluate()
    assert counting.ran == [up["metadata"]["name"]] * 2
    assert list(w.seen["gpu-stack-down"]) == ["pod/gpu-operator/nvidia-device-plugin-"
                                              "daemonset-a-0"]
    assert w.answers["gpu-stack-down"].tests == 1


def test_new_labels_or_containers_are_asked_again() -> None:
    view = Objects()
    view.put(crash_looping(web_pod()))
    w, counting = watching(view)
    answers = w.answers["gpu-stack-down"]
    assert counting.ran == [] and answers.tests == 1
    relabelled = copy.deepcopy(view.get("Pod", "web-0", "apps") or {})
    relabelled["metadata"]["labels"] = {"app": "nvidia-device-plugin-daemonset"}
    view.put(relabelled)
    w.changed("Pod", *KEY)
    w.evaluate()
    assert answers.tests == 2 and counting.ran == ["web-0"]
    assert [s.obs.summary for s in w.seen["gpu-stack-down"].values()] == [
        "device plugin pod apps/web-0 on a-0: web: CrashLoopBackOff, 3 restarts"]
    # Back to a web pod, by its image this time: asked again, and its observation goes.
    plain = {**relabelled, "metadata": {**relabelled["metadata"], "labels": {"app": "web"}}}
    view.put(plain)
    w.changed("Pod", *KEY)
    w.evaluate()
    assert answers.tests == 3 and not w.seen["gpu-stack-down"]
    imaged = {**plain, "spec": {**plain["spec"], "containers": [
        {"name": "web", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"}]}}
    view.put(imaged)
    w.changed("Pod", *KEY)
    w.evaluate()
    assert answers.tests == 4 and len(w.seen["gpu-stack-down"]) == 1


def test_a_deleted_pods_answer_is_forgotten() -> None:
    view = Objects()
    view.put(web_pod())
    w, _ = watching(view)
    answers = w.answers["gpu-stack-down"]
    assert answers.keys() == {KEY}
    view.drop("Pod", "web-0", "apps")
    w.changed("Pod", *KEY)
    w.evaluate()
    assert answers.keys() == set()
    view.put(web_pod())  # gone from a full list (a re-list) too
    w.scan()
    w.evaluate()
    view.drop("Pod", "web-0", "apps")
    w.scan()
    w.evaluate()
    assert answers.keys() == set()
