"""Cluster roles for training on several processes: which task this is, and who is chief.

One training script serves every process of a job; it asks this module what
it is and acts on that::

    from tfsnippet import distributed

    info = distributed.cluster_info()
    if info.num_ps and info.task_type in ('worker', 'ps'):
        # ParameterServerStrategy: workers and ps only serve; the chief coordinates.
        server = tf.distribute.Server(
            info.cluster_spec(), job_name=info.task_type, task_index=info.task_index,
            protocol='grpc', start=True)
        server.join()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # or ParameterServerStrategy
    ...
    if distributed.is_chief():
        ...  # only the chief writes checkpoints, summaries and logs

The description comes from ``TF_CONFIG``, else from a Kubernetes Indexed Job,
else from SLURM, else this process runs alone (see :func:`cluster_info`).  Where the processes come from:

* **On one machine**, ``python -m tfsnippet.launch --workers 2 train.py ARGS``
  starts them with their ``TF_CONFIG`` on free loopback ports, and restarts
  them all when one fails (see :mod:`tfsnippet.launch`).
* **Vertex AI** (and Kubeflow's TFJob) set ``TF_CONFIG`` in every replica:
  declare worker pools 0 (the chief), 1 (workers) and 2 (parameter
  servers) and run the same script in each; nothing else to do.
* **Kubernetes**: an Indexed Job with a headless Service; set
  ``TFSNIPPET_NUM_WORKERS`` and ``TFSNIPPET_SERVICE`` (and optionally
  ``TFSNIPPET_PORT``) in the pod template, and :func:`cluster_info` builds
  the cluster from ``JOB_COMPLETION_INDEX`` and the pods' host names.
  TensorFlow does not read these: hand it ``cluster_info().cluster_resolver()``.
* **SLURM**: run ``srun --ntasks=4 python train.py ARGS`` (in an ``sbatch``
  script or an ``salloc`` shell).  Every task is a ``'worker'``, ranked by
  ``SLURM_PROCID``; task k on a node listens on port ``8888 + k`` (pass
  ``slurm_port`` to :func:`cluster_info` for another base).  TensorFlow does
  not read SLURM's variables itself: hand it
  ``cluster_info().cluster_resolver()``, or set ``TF_CONFIG`` from
  ``cluster_info().tf_config()`` before building the strategy.

Nothing here imports TensorFlow, except :meth:`ClusterInfo.cluster_resolver`.
"""

from __future__ import annotations

from .cluster import (DEFAULT_K8S_PORT, DEFAULT_SLURM_PORT, K8S_JOB_NAME_ENV, K8S_PORT_ENV,
                      K8S_SERVICE_ENV, K8S_WORKERS_ENV, RUN_ID_ENV, TASK_TYPES, ClusterInfo,
                      cluster_info, expand_hostlist, shared_run_id)

__all__ = ['ClusterInfo', 'cluster_info', 'expand_hostlist', 'is_chief', 'num_workers',
           'task_type', 'task_index', 'shared_run_id', 'TASK_TYPES', 'DEFAULT_SLURM_PORT',
           'DEFAULT_K8S_PORT', 'K8S_WORKERS_ENV', 'K8S_SERVICE_ENV', 'K8S_PORT_ENV',
           'K8S_JOB_NAME_ENV', 'RUN_ID_ENV']


def is_chief() -> bool:
    """Whether this process is the chief (the one that writes checkpoints and logs).

    Raises:
        ValueError: The cluster description in the environment is malformed.
    """
    return cluster_info().is_chief


def num_workers() -> int:
    """Number of chief and worker tasks in the cluster (1 when running alone).

    Raises:
        ValueError: The cluster description in the environment is malformed.
    """
    return cluster_info().num_workers


def task_type() -> str:
    """This process's task type: ``'chief'``, ``'worker'``, ``'ps'`` or ``'evaluator'``.

    Raises:
        ValueError: The cluster description in the environment is malformed.
    """
    return cluster_info().task_type


def task_index() -> int:
    """This process's index among the tasks of its type.

    Raises:
        ValueError: The cluster description in the environment is malformed.
    """
    return cluster_info().task_index
