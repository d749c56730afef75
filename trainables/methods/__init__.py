"""The methods: one module per method, each a ``trainables.base.Method`` subclass found by
name through the lazy registry (``trainables.registry``).

* ``ce``, ``ce_scl``, ``lacon``, ``supcl_seq``, ``scl_moo``, ``simcse``, ``vascl``, ``abalone``
  (+ ``abalone_losses``, its ``loss`` names mapped to the loss functions): the methods;
* ``representation``: the base class of the unsupervised methods (SimCSE, VaSCL);
  ``epo``: SCL-MOO's EPO step; ``momentum_queue``: ABALONE's MoCo queue and key encoder;
* ``declarations``: each method's hyperparameters, label kind and metric names, torch-free
  (the spec reads them through ``registry.declaration`` without importing a method).

May import: torch, numpy, scipy, scikit-learn, transformers and the generic modules of
``trainables`` (``base``, ``encoder``, ``batches``, ``gather``, ``global_batch``, ``params``,
``errors``, ``metrics``, ``warm_start``), ``trainables.losses`` and ``trainables.evaluation``;
never ``trainables.loop``, ``trainables.registry`` or ``contrasweep``. ``declarations`` imports
only ``trainables.params``. This file imports nothing, so importing ``declarations`` stays light.

A new method = one module here + one line in ``trainables/registry.py`` + its entry in
``declarations.py`` + one YAML in ``search_spaces/`` (+ its tests).
"""
