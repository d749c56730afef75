"""Trial actors kept for the next trials rather than killed and booted again (issue 54).

*An actor that is booting is not thrown away.* Ray Tune stages a pending trial by asking for a
new actor; when a running trial's actor is freed first, Tune hands it to the staged trial and
removes the actor it had asked for, booting or not. With short trials on a full machine that
was the steady state of every sweep: one actor ran every trial, and the other slot's worker was
killed after 4-5 s of booting and booted again for the next staged trial (at 300 no-op trials,
a new worker every 4-5 s: the second CPU spent on boots). ``keep_warm`` has Tune hand the freed
actor to a pending trial that has no actor of its own instead (Tune's next step looks for one);
the staged trial keeps the actor that is booting for it and starts on it, and then both slots
run trials. An actor still waiting for resources is replaced as Tune does (nothing has started).

With ``reuse_actors`` Ray Tune (2.60) also keeps a finished trial's actor only for the trials
*staged* (waiting for an actor) with the same resources, and beyond them one actor in all
(``_ObjectCache(may_keep_one=True)``); any other finished actor is stopped. A sweep's searchers
stage no trial while its concurrency is full, so two trials ending before the next one is made
lose the second actor, and the next trial waits for a new worker process. (Measured apart: this
rule alone left the churn above as it was; how often it fires once both slots run is not counted.)

``WarmActors`` keeps every finished actor while no staged trial asks for *other* resources:
the next trials of the sweep, which ask for the same, take them (Tune hands a cached actor to a
pending trial first). Tune's own rule applies as soon as a trial with other resources waits (its
request is not blocked by idle actors of ours), and every idle actor goes when the search is
over (Tune flushes the cache then, ``force_all``). An idle actor holds only what its next trial
takes; a sweep's trials all ask for the same resources, so it never blocks one of them.

May import: Ray Tune's ``_ObjectCache`` (``ray.tune.utils.object_cache``); it reaches Tune's
controller (Ray 2.60's private attributes): the one private touch of Ray left (tests/test_private_api.py).
"""

from __future__ import annotations

from ray.tune.utils.object_cache import _ObjectCache


class WarmActors(_ObjectCache):
    """Tune's actor cache (grouped by resource request), keeping idle actors as above."""

    def __init__(self):
        super().__init__(may_keep_one=True)

    def _others_wait(self, key) -> bool:
        """A staged trial asks for resources other than ``key``'s."""
        return any(count > 0 for other, count in self._max_num_objects.items() if other != key)

    def cache_object(self, key, obj) -> bool:
        if self._others_wait(key):
            return super().cache_object(key, obj)
        self._cached_objects[key].append(obj)
        self._num_cached_objects += 1
        return True

    def flush_cached_objects(self, force_all: bool = False):
        if force_all:
            yield from super().flush_cached_objects(force_all=True)
            return
        for key, objs in self._cached_objects.items():
            if not self._others_wait(key):
                continue  # kept for the next trials, which ask for the same
            while len(objs) > max(self._max_num_objects[key], 0):
                self._num_cached_objects -= 1
                yield objs.pop(0)


class _KeepsBootingActors:
    """Tune's controller, but a trial whose actor is booting waits for it (the module)."""

    # the ignores: a mixin, whose other base is Tune's controller class (keep_warm), unknown to mypy
    def _maybe_reuse_cached_actor(self, trial) -> bool:
        if booting(self, self._trial_to_actor.get(trial)):  # type: ignore[attr-defined]
            return False  # it starts on its own actor; the freed one goes to another pending trial
        return super()._maybe_reuse_cached_actor(trial)  # type: ignore[misc]


def keep_warm(controller) -> bool:
    """Give Tune's controller (Ray 2.60: ``_actor_cache``, ``_maybe_reuse_cached_actor``) a
    ``WarmActors`` cache holding what its own held, and keep a booting actor for its trial (its
    class becomes a subclass: Tune pickles the controller's attributes into its saved state, never
    its class). ``controller``: Tune's controller or the schedulers' view of it (which wraps it).
    Returns whether it did (another Tune is left as it is)."""
    controller = getattr(controller, "_tune_controller", controller)
    cache = getattr(controller, "_actor_cache", None)
    if (
        not isinstance(cache, _ObjectCache)
        or isinstance(cache, WarmActors)
        or not hasattr(controller, "_maybe_reuse_cached_actor")
    ):
        return False
    warm = WarmActors()
    warm._cached_objects.update({k: list(v) for k, v in cache._cached_objects.items()})
    warm._num_cached_objects = cache._num_cached_objects
    warm._max_num_objects.update(cache._max_num_objects)
    controller._actor_cache = warm
    controller.__class__ = type(f"Warm{type(controller).__name__}", (_KeepsBootingActors, type(controller)), {})
    return True


def booting(controller, tracked_actor) -> bool:
    """The actor has its resources and its process, and has not said it is ready."""
    return (
        tracked_actor is not None
        and controller._actor_manager.is_actor_started(tracked_actor)
        and tracked_actor not in controller._started_actors
    )
