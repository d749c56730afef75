"""Tune's actor cache under ``search.warm_actors``: a finished trial's actor is kept for the
next trial with the same resources, not killed, until a trial with other resources waits or the
search is over (issue 54)."""

from types import SimpleNamespace

from ray.tune.utils.object_cache import _ObjectCache

from contrasweep.search.warm_actors import WarmActors, keep_warm

CPU, GPU = "1 cpu", "1 gpu"  # resource requests: Tune groups actors by them


def test_tunes_own_cache_kills_the_second_actor_that_ends_with_nothing_staged():
    cache = _ObjectCache(may_keep_one=True)  # what Ray 2.60's controller holds
    assert cache.cache_object(CPU, "a") and not cache.cache_object(CPU, "b")  # b's worker is killed, and booted again


def test_every_finished_actor_waits_for_the_next_trials():
    cache = WarmActors()
    assert cache.cache_object(CPU, "a") and cache.cache_object(CPU, "b")
    assert list(cache.flush_cached_objects()) == []  # Tune's cleanup at each step keeps them
    cache.increase_max(CPU)  # a trial staged: it takes one
    assert cache.pop_cached_object(CPU) == "a" and cache.num_cached_objects == 1


def test_a_trial_with_other_resources_gets_what_tune_would_give_it():
    cache = WarmActors()
    cache.cache_object(CPU, "a"), cache.cache_object(CPU, "b")
    cache.increase_max(GPU)
    assert list(cache.flush_cached_objects()) == ["a", "b"]  # no idle actor holds what it waits for
    assert not cache.cache_object(CPU, "c")  # Tune's rule while it waits: only what staged trials need
    cache.increase_max(CPU)
    assert cache.cache_object(CPU, "d") and not cache.cache_object(CPU, "e")


def test_the_search_over_every_idle_actor_goes():
    cache = WarmActors()
    cache.cache_object(CPU, "a"), cache.cache_object(CPU, "b")
    assert list(cache.flush_cached_objects(force_all=True)) == ["a", "b"] and cache.num_cached_objects == 0


def test_the_controller_gets_it_once_with_what_it_held():
    tune_cache = _ObjectCache(may_keep_one=True)
    tune_cache.increase_max(CPU), tune_cache.cache_object(CPU, "a")
    controller = _Tune()
    controller._actor_cache = tune_cache
    assert keep_warm(controller) and not keep_warm(controller)
    warm = controller._actor_cache
    assert isinstance(warm, WarmActors) and warm.num_cached_objects == 1 and warm.total_max_objects == 1
    assert not keep_warm(SimpleNamespace())  # another Tune: left as it is


class _Tune:
    """Ray 2.60's controller, as far as the reuse of a cached actor goes."""

    def __init__(self):
        self._actor_cache = _ObjectCache(may_keep_one=True)
        self._trial_to_actor, self._started_actors, self.reused = {}, set(), []
        self._actor_manager = SimpleNamespace(is_actor_started=lambda actor: actor in self.placed)
        self.placed = set()

    def _maybe_reuse_cached_actor(self, trial) -> bool:
        self.reused.append(trial)
        return True


def test_a_trial_whose_actor_is_booting_keeps_it_and_the_freed_actor_goes_to_another():
    controller = _Tune()
    assert keep_warm(controller)
    controller._trial_to_actor.update(booting="p", waiting="q", running="r")
    controller.placed |= {"p", "r"}  # p has its worker and is not ready yet; q waits for resources
    controller._started_actors.add("r")
    assert not controller._maybe_reuse_cached_actor("booting")  # p is not killed for it
    assert controller._maybe_reuse_cached_actor("waiting") and controller._maybe_reuse_cached_actor("new")
    assert controller.reused == ["waiting", "new"]  # Tune's own rule for the others
    assert isinstance(controller, _Tune) and "_maybe_reuse_cached_actor" not in vars(controller)  # nothing Tune saves
