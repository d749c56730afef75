"""Every method's loss and gradients on one global batch are the same with 1 worker and with 2
DDP ranks (gloo, two real processes, float64): in-batch contrastive losses see every rank's
rows (``trainables.global_batch``) and DDP's gradient averaging gives one worker's gradient."""

from __future__ import annotations

import pytest
import torch

from helpers import loop_config, multilabel_tables, toy_tables
from test_methods_contract import CASES, IDS
from trainables.batches import to_device, train_batches
from trainables.global_batch import global_batch
from trainables.loop import build_method, seed_everything

WORLD = 2
TOL = 1e-6
# a short global batch split 3/2 over the ranks: methods whose whole loss is computed on the
# gathered batch stay exact; CE-like per-rank means are averaged by DDP (equal only for equal shards)
UNEVEN = {"lacon", "supcl_seq", "simcse", "vascl", "abalone"}


def _sizes(name: str, hp: dict) -> tuple[int, ...]:
    whole_loss_gathered = name in UNEVEN and hp.get("loss") not in ("bce", "focal", "asl")  # ABALONE's BCE family is per row
    return (8, 5) if whole_loss_gathered else (8,)


def _tables(model_dir: str) -> dict:
    return {"single": toy_tables(model_dir, n_per_class=8), "multi": multilabel_tables(model_dir)}


def _batch(data: dict, size: int, rank: int, world: int) -> dict:
    return next(train_batches(data["tables"]["train"], size, 0, 0, rank, world))


def _loss_and_grads(name: str, hp: dict, model_dir: str, data: dict, batch: dict, wrap=None):
    """(loss, {parameter: gradient}) of one training step in float64 without dropout."""
    seed_everything(0)  # the same initial heads in every process
    method = build_method({**loop_config(model_dir, **hp), "method": name}, data["num_labels"]).double()
    method.eval()  # no dropout: the two runs must see the same function
    model = wrap(method) if wrap else method
    out = model(to_device(batch, torch.device("cpu")))
    out["loss"].backward()
    grads = {k: p.grad.detach().clone() for k, p in method.named_parameters() if p.grad is not None}
    return float(out["loss"].detach()), grads


def _rank_main(rank: int, init_file: str, model_dir: str, out_file: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    tables = _tables(model_dir)
    from trainables.registry import get_method

    results = {}
    for case_id, (name, hp) in zip(IDS, CASES):
        data = tables[get_method(name).label_kind]
        for size in _sizes(name, hp):
            wrap = lambda m: DistributedDataParallel(m, find_unused_parameters=True)  # noqa: E731 (as prepare_model)
            loss, grads = _loss_and_grads(name, hp, model_dir, data, _batch(data, size, rank, WORLD), wrap)
            losses = [None] * WORLD
            dist.all_gather_object(losses, loss)
            results[(case_id, size)] = (sum(losses) / WORLD, grads)
    if rank == 0:
        torch.save(results, out_file)
    dist.barrier()
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_ranks(tiny_model_dir, tmp_path_factory):
    """Every case's (mean loss over ranks, DDP-averaged gradients) from two gloo processes."""
    import torch.multiprocessing as mp

    tmp = tmp_path_factory.mktemp("ddp")
    out_file = tmp / "ranks.pt"
    mp.spawn(_rank_main, args=(str(tmp / "init"), tiny_model_dir, str(out_file)), nprocs=WORLD, join=True)
    return torch.load(out_file, weights_only=False)


@pytest.mark.slow
@pytest.mark.parametrize("name, hp", CASES, ids=IDS)
def test_two_ranks_give_one_workers_loss_and_gradients(name, hp, tiny_model_dir, two_ranks):
    from trainables.registry import get_method

    data = _tables(tiny_model_dir)[get_method(name).label_kind]
    case_id = IDS[CASES.index((name, hp))]
    for size in _sizes(name, hp):
        loss, grads = _loss_and_grads(name, hp, tiny_model_dir, data, _batch(data, size, 0, 1))
        ddp_loss, ddp_grads = two_ranks[(case_id, size)]
        assert abs(ddp_loss - loss) <= TOL * max(1.0, abs(loss)), (size, ddp_loss, loss)
        assert set(ddp_grads) == set(grads), size
        worst = max(float((ddp_grads[k] - g).abs().max()) for k, g in grads.items())
        assert worst <= TOL, (size, worst)


def test_global_batch_is_the_identity_without_a_process_group():
    z, y = torch.randn(3, 4, requires_grad=True), torch.tensor([0, 1, 1])
    gz, gy = global_batch(z, y)
    assert gz is z and gy is y


def test_a_lone_shard_loss_differs_from_the_global_one():
    """What the gather fixes: SupCon on each half of a batch is not SupCon on the batch."""
    from trainables.losses import supcon_loss

    torch.manual_seed(0)
    z, y = torch.randn(8, 4, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 0, 1, 0, 1])
    halves = (supcon_loss(z[0::2], y[0::2], 0.3) + supcon_loss(z[1::2], y[1::2], 0.3)) / 2
    assert abs(float(halves - supcon_loss(z, y, 0.3))) > 1e-3
