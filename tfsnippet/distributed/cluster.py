"""Where this process sits in a training cluster, read from `TF_CONFIG`, a Kubernetes
Indexed Job, SLURM, or alone."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Mapping, Sequence

from ..utils.text import short_repr

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.distribute.cluster_resolver import ClusterResolver

__all__ = ['ClusterInfo', 'cluster_info', 'expand_hostlist', 'TASK_TYPES',
           'DEFAULT_SLURM_PORT', 'DEFAULT_K8S_PORT', 'K8S_WORKERS_ENV', 'K8S_SERVICE_ENV',
           'K8S_PORT_ENV', 'K8S_JOB_NAME_ENV', 'RUN_ID_ENV', 'shared_run_id']

TASK_TYPES: tuple[str, ...] = ('chief', 'worker', 'ps', 'evaluator')
"""The task types a cluster may hold, as TensorFlow names them."""

DEFAULT_SLURM_PORT = 8888
"""First port of the tasks on each SLURM node (the next task on a node gets the next port)."""

DEFAULT_K8S_PORT = 2222
"""Port every worker pod of a Kubernetes Indexed Job listens on, unless `K8S_PORT_ENV` says."""

K8S_WORKERS_ENV = 'TFSNIPPET_NUM_WORKERS'
"""Variable holding the number of workers of a Kubernetes Indexed Job (its ``completions``)."""

K8S_SERVICE_ENV = 'TFSNIPPET_SERVICE'
"""Variable holding the name of the headless Service of a Kubernetes Indexed Job (the
pods' ``subdomain``)."""

K8S_PORT_ENV = 'TFSNIPPET_PORT'
"""Variable holding the port of the workers of a Kubernetes Indexed Job (default 2222)."""

K8S_JOB_NAME_ENV = 'TFSNIPPET_JOB_NAME'
"""Variable holding the name of a Kubernetes Indexed Job (default: read from ``HOSTNAME``)."""

RUN_ID_ENV = 'TFSNIPPET_RUN_ID'
"""Variable holding the run id every process of a job shares (``python -m
tfsnippet.launch`` sets it, one per launch, kept across restarts)."""

Source = Literal['tf_config', 'kubernetes', 'slurm', 'local']


@dataclass(frozen=True)
class ClusterInfo:
    """This process's place in the cluster: its task, the task counts, and who is chief.

    Build it with :func:`cluster_info`, which reads the environment.  The
    counts follow TensorFlow: ``num_workers`` counts the ``'chief'`` task and
    the ``'worker'`` tasks (the processes that run training steps under
    ``MultiWorkerMirroredStrategy``), ``num_ps`` the parameter servers.

    Args:
        task_type: One of ``'chief'``, ``'worker'``, ``'ps'``, ``'evaluator'``.
        task_index: Index of this task among the tasks of its type.
        num_workers: Number of ``'chief'`` plus ``'worker'`` tasks (1 when alone).
        num_ps: Number of ``'ps'`` tasks.
        is_chief: Whether this task is the chief: the ``'chief'`` task if the
            cluster has one, else worker 0.  Only the chief should write
            checkpoints, summaries and logs.
        cluster: Task type to the ``'host:port'`` address of each task of
            that type; empty for a process that runs alone.  It is stored
            read-only; :meth:`cluster_spec` gives a plain copy.
        source: Where the description came from: ``'tf_config'``,
            ``'kubernetes'``, ``'slurm'`` or ``'local'``.

    Example:

        >>> from tfsnippet.distributed import cluster_info
        >>> info = cluster_info({'TF_CONFIG': '{"cluster": {"worker": ["h1:2222", "h2:2222"]},'
        ...                                    ' "task": {"type": "worker", "index": 1}}'})
        >>> info.task_type, info.task_index, info.num_workers, info.is_chief
        ('worker', 1, 2, False)
    """

    task_type: str
    task_index: int
    num_workers: int
    num_ps: int
    is_chief: bool
    cluster: Mapping[str, Sequence[str]] = field(hash=False)
    source: Source

    def __post_init__(self) -> None:
        frozen = MappingProxyType({k: tuple(v) for k, v in self.cluster.items()})
        object.__setattr__(self, 'cluster', frozen)

    @property
    def worker_rank(self) -> int | None:
        """Position of this task among the chief and worker tasks, chief first.

        ``None`` for a ``'ps'`` or ``'evaluator'`` task.  Workers ranked
        ``0 .. num_workers - 1`` are the ones to split the input between.
        """
        if self.task_type == 'chief':
            return 0
        if self.task_type == 'worker':
            return len(self.cluster.get('chief', ())) + self.task_index
        return None

    @classmethod
    def alone(cls) -> ClusterInfo:
        """The description of a process that runs alone: the chief, and the only worker."""
        return _LOCAL

    @classmethod
    def of_task(cls, cluster: Mapping[str, Sequence[str]], task_type: str, task_index: int,
                source: Source = 'tf_config') -> ClusterInfo:
        """Describe task `task_type`/`task_index` of `cluster`: the one chief rule.

        The chief is the ``'chief'`` task if the cluster has one, else
        worker 0; ``num_workers`` counts the chief and worker tasks.  Every
        part of the package that asks who is chief (the launcher, the
        experiment, the training loop's backends) asks this.

        Args:
            cluster: Task type to the addresses of its tasks.
            task_type: This task's type.
            task_index: This task's index among the tasks of its type.
            source: Where the description came from.

        Example:
            >>> from tfsnippet.distributed import ClusterInfo
            >>> info = ClusterInfo.of_task({'chief': ['a:1'], 'worker': ['b:1']}, 'worker', 0)
            >>> info.is_chief, info.num_workers, info.worker_rank
            (False, 2, 1)
        """
        if 'chief' in cluster:
            is_chief = task_type == 'chief'
        else:
            is_chief = task_type == 'worker' and task_index == 0
        return cls(task_type=task_type, task_index=task_index,
                   num_workers=len(cluster.get('chief', ())) + len(cluster.get('worker', ())),
                   num_ps=len(cluster.get('ps', ())), is_chief=is_chief,
                   cluster={k: list(v) for k, v in cluster.items()}, source=source)

    def cluster_spec(self) -> dict[str, list[str]]:
        """Return a plain copy of :attr:`cluster`, e.g. for ``tf.train.ClusterSpec``."""
        return {k: list(v) for k, v in self.cluster.items()}

    def tf_config(self) -> dict[str, Any]:
        """Return the `TF_CONFIG` that describes this task (``{}`` when alone).

        Set ``os.environ['TF_CONFIG'] = json.dumps(info.tf_config())`` before
        building a strategy to hand a SLURM cluster to TensorFlow.
        """
        if not self.cluster:
            return {}
        return {'cluster': self.cluster_spec(),
                'task': {'type': self.task_type, 'index': self.task_index}}

    def cluster_resolver(self) -> ClusterResolver:
        """Return a TensorFlow cluster resolver for this task (imports TensorFlow).

        Pass it to ``tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=...)``
        or ``tf.distribute.experimental.ParameterServerStrategy``.
        """
        import tensorflow as tf

        spec = tf.train.ClusterSpec(self.cluster_spec())
        if not self.cluster:
            return tf.distribute.cluster_resolver.SimpleClusterResolver(spec)
        return tf.distribute.cluster_resolver.SimpleClusterResolver(
            spec, task_type=self.task_type, task_id=self.task_index, rpc_layer='grpc')


_LOCAL = ClusterInfo(task_type='chief', task_index=0, num_workers=1, num_ps=0, is_chief=True,
                     cluster={}, source='local')


def cluster_info(environ: Mapping[str, str] | None = None, *,
                 slurm_port: int = DEFAULT_SLURM_PORT) -> ClusterInfo:
    """Describe this process's place in the cluster, from its environment variables.

    The sources are tried in this order:

    1. ``TF_CONFIG`` (set by the cluster manager: Vertex AI, a Kubeflow
       TFJob, or ``python -m tfsnippet.launch``), a JSON object such as
       ``{"cluster": {"worker": ["h1:2222", "h2:2222"]}, "task": {"type":
       "worker", "index": 0}}``.  A missing ``task.index`` means 0, as in
       TensorFlow.  An ``'evaluator'`` task may be left out of ``cluster``,
       as TensorFlow's evaluator usually is.  A ``TF_CONFIG`` that is blank,
       or has neither ``cluster`` nor ``task``, counts as unset.
    2. A Kubernetes Indexed Job with a headless Service, when
       ``TFSNIPPET_NUM_WORKERS`` or ``TFSNIPPET_SERVICE`` is set (in the
       pod template): every pod is a ``'worker'``, indexed by
       ``JOB_COMPLETION_INDEX`` (which Kubernetes sets), worker 0 being the
       chief.  ``TFSNIPPET_NUM_WORKERS`` is the number of workers (the
       Job's ``completions``), ``TFSNIPPET_SERVICE`` the headless Service
       (the pods' ``subdomain``), ``TFSNIPPET_PORT`` the port every worker
       listens on (2222 by default).  Worker k is
       ``<job>-<k>.<service>:<port>``, the host name Kubernetes gives the
       k-th pod of an Indexed Job; the Job's name comes from
       ``TFSNIPPET_JOB_NAME``, else from ``HOSTNAME`` (``<job>-<index>``).
    3. SLURM, when ``SLURM_PROCID`` is set (a task started by ``srun``): every
       task is a ``'worker'``, indexed by ``SLURM_PROCID``.  The task count
       comes from ``SLURM_STEP_NUM_TASKS`` (or ``SLURM_NTASKS``), the nodes
       from ``SLURM_STEP_NODELIST`` (or ``SLURM_JOB_NODELIST``), the tasks per
       node from ``SLURM_STEP_TASKS_PER_NODE`` (or ``SLURM_TASKS_PER_NODE``,
       else an even split).  Tasks are laid out over the nodes in order (the
       default "block" distribution), the k-th task on a node listening on
       ``slurm_port + k``.
    4. Otherwise this process runs alone: the chief, and the only worker.

    Args:
        environ: The variables to read; ``os.environ`` by default.
        slurm_port: First port of the tasks on each SLURM node.

    Returns:
        The :class:`ClusterInfo` of this process.

    Raises:
        ValueError: ``TF_CONFIG``, the Kubernetes or the SLURM variables are
            malformed or incomplete; the message names the key or variable,
            and shows what it holds.

    .. note::
        Under SLURM, start one task per process with ``srun``.  A batch script
        run directly is a single process, yet sees the job's task count.
    """
    env = os.environ if environ is None else environ
    if type(slurm_port) is not int or not 1 <= slurm_port <= 65535:
        raise ValueError(f'`slurm_port` must be an int in 1..65535, got {slurm_port!r}')
    raw = env.get('TF_CONFIG', '')
    if raw.strip():
        info = _from_tf_config(raw)
        if info is not None:
            return info
    if _first_present(env, K8S_WORKERS_ENV, K8S_SERVICE_ENV) is not None:
        return _from_kubernetes(env)
    if 'SLURM_PROCID' in env:
        return _from_slurm(env, slurm_port)
    return _LOCAL




def shared_run_id(environ: Mapping[str, str] | None = None) -> str | None:
    """The run id every process of this job shares, kept when the job restarts, or ``None``.

    An :class:`~tfsnippet.Experiment` given no `name` takes it, so that all
    workers record into the chief's run and a restarted (or requeued) job
    resumes that run.  In this order:

    1. ``TFSNIPPET_RUN_ID``, when set (``python -m tfsnippet.launch`` sets
       one per launch, the same after a restart; set it in a job spec
       yourself to name the run);
    2. a Kubernetes Indexed Job (see :func:`cluster_info`): ``k8s-<job>``;
    3. a SLURM job (``SLURM_JOB_ID`` is set) of several tasks, or of one
       (the script run by the batch script itself, or by ``srun`` as one
       task): ``slurm-<SLURM_JOB_ID>`` (a requeued job keeps its id, so a
       one-GPU ``sbatch --requeue`` job resumes its run; each task of a job
       array has its own id);
    4. otherwise ``None``: a process alone, or a ``TF_CONFIG`` alone (Vertex
       AI, a TFJob), which says nothing all workers share and that survives
       a restart.

    .. note::
        The id outlives the run: every process of the job that makes an
        unnamed Experiment under the same root resumes that run.  A SLURM
        job that trains several runs one after another (a sweep in one batch
        script), or a Kubernetes Job created again under the same name after
        its run completed, would resume the old run (reload its config,
        restore its last checkpoint, and train no further if it was done):
        give each run a ``name=`` (or ``TFSNIPPET_RUN_ID``), or delete the
        old run, or name the Kubernetes Job anew (``generateName``).

    Args:
        environ: The variables to read; ``os.environ`` by default.

    Raises:
        ValueError: As :func:`cluster_info`.
    """
    env = os.environ if environ is None else environ
    given = env.get(RUN_ID_ENV, '').strip()
    if given:
        return given
    info = cluster_info(env)
    if info.source == 'kubernetes':
        job = env.get(K8S_JOB_NAME_ENV, '').strip() or env.get('HOSTNAME', '').strip()[
            :-len(f'-{info.task_index}')]
        return f'k8s-{job}'
    job_id = env.get('SLURM_JOB_ID', '').strip()
    if job_id and (info.source == 'slurm' or info.num_workers == 1):
        return f'slurm-{job_id}'
    return None


# ------------------------------------------------------------------ TF_CONFIG
_ADDRESS = re.compile(r'^(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):(\d{1,5})$')


def _from_tf_config(raw: str) -> ClusterInfo | None:
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f'`TF_CONFIG` must be a JSON object, got {short_repr(raw)} '
                         f'({e.msg} at character {e.pos})') from e
    if not isinstance(config, dict):
        raise ValueError(f'`TF_CONFIG` must be a JSON object, got {short_repr(config)}')
    if not config.get('cluster') and 'task' not in config:
        return None
    cluster = _check_cluster(config.get('cluster'))

    task = config.get('task')
    if not isinstance(task, dict):
        what = 'is missing' if task is None else f'must be an object, got {short_repr(task)}'
        raise ValueError(f"`TF_CONFIG['task']` {what}; expected "
                         f'{{"type": <one of {", ".join(TASK_TYPES)}>, "index": <int>}}')
    task_type = task.get('type')
    if task_type not in TASK_TYPES:
        raise ValueError(f"`TF_CONFIG['task']['type']` must be one of {list(TASK_TYPES)}, "
                         f'got {short_repr(task_type)}')
    task_index = task.get('index', 0)
    if type(task_index) is not int or task_index < 0:
        raise ValueError(f"`TF_CONFIG['task']['index']` must be an int >= 0, "
                         f'got {short_repr(task_index)}')
    if task_type in cluster:
        count = len(cluster[task_type])
        if task_index >= count:
            raise ValueError(
                f"`TF_CONFIG['task']['index']` is {task_index} but "
                f"`TF_CONFIG['cluster'][{task_type!r}]` has {count} "
                f"entr{'y' if count == 1 else 'ies'}")
    elif task_type != 'evaluator':
        raise ValueError(
            f"`TF_CONFIG['task']['type']` is {task_type!r} but `TF_CONFIG['cluster']` "
            f'has no {task_type!r} tasks (it has {", ".join(map(repr, cluster))})')
    return ClusterInfo.of_task(cluster, task_type, task_index, 'tf_config')


def _check_cluster(cluster: Any) -> dict[str, list[str]]:
    rule = "a non-empty object of task type to a list of 'host:port' strings"
    if cluster is None:
        raise ValueError(f"`TF_CONFIG['cluster']` is missing; expected {rule}")
    if not isinstance(cluster, dict) or not cluster:
        raise ValueError(f"`TF_CONFIG['cluster']` must be {rule}, got {short_repr(cluster)}")
    checked: dict[str, list[str]] = {}
    seen: dict[str, str] = {}
    for task_type, addresses in cluster.items():
        key = f"`TF_CONFIG['cluster'][{task_type!r}]`"
        if task_type not in TASK_TYPES:
            raise ValueError(f"`TF_CONFIG['cluster']` has task type {short_repr(task_type)}; "
                             f'expected only {list(TASK_TYPES)}')
        if not isinstance(addresses, list):
            raise ValueError(f"{key} must be a list of 'host:port' strings, "
                             f'got {short_repr(addresses)}')
        for i, address in enumerate(addresses):
            match = _ADDRESS.match(address) if isinstance(address, str) else None
            if match is None or not 1 <= int(match.group(2)) <= 65535:
                raise ValueError(f"`TF_CONFIG['cluster'][{task_type!r}][{i}]` must be a "
                                 f"'host:port' string, got {short_repr(address)}")
            where = f'{task_type} {i}'
            if address in seen:
                raise ValueError(f"`TF_CONFIG['cluster']` gives {address!r} to both "
                                 f'{seen[address]} and {where}; every task needs its own')
            seen[address] = where
        if addresses:
            checked[task_type] = list(addresses)
    if len(checked.get('chief', ())) > 1:
        raise ValueError(f"`TF_CONFIG['cluster']['chief']` must have 1 entry, "
                         f"got {short_repr(checked['chief'])}")
    if not checked:
        raise ValueError(f"`TF_CONFIG['cluster']` lists no tasks, got {short_repr(cluster)}")
    return checked


# ----------------------------------------------------------------- Kubernetes
_DNS_LABEL = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')


def _from_kubernetes(env: Mapping[str, str]) -> ClusterInfo:
    missing = [name for name in ('JOB_COMPLETION_INDEX', K8S_WORKERS_ENV, K8S_SERVICE_ENV)
               if not env.get(name, '').strip()]
    if missing:
        given = K8S_WORKERS_ENV if env.get(K8S_WORKERS_ENV, '').strip() else K8S_SERVICE_ENV
        raise ValueError(
            f'`{given}` is set, so this pod is a worker of a Kubernetes Indexed Job, but '
            f'{" and ".join(f"`{m}`" for m in missing)} '
            f'{"is" if len(missing) == 1 else "are"} not; run it in a Job with '
            f'`completionMode: Indexed` (which sets `JOB_COMPLETION_INDEX`) and set both '
            f'`{K8S_WORKERS_ENV}` (the `completions`) and `{K8S_SERVICE_ENV}` (the headless '
            f'Service, the pods\' `subdomain`) in the pod template')
    num_workers = _slurm_int(env, K8S_WORKERS_ENV, minimum=1)
    index = _slurm_int(env, 'JOB_COMPLETION_INDEX', minimum=0)
    if index >= num_workers:
        raise ValueError(f'`JOB_COMPLETION_INDEX` is {index} but `{K8S_WORKERS_ENV}` is '
                         f'{num_workers}; set `{K8S_WORKERS_ENV}` to the Job\'s `completions`')
    service = env[K8S_SERVICE_ENV].strip()
    if not _DNS_LABEL.match(service) or len(service) > 63:
        raise ValueError(f'`{K8S_SERVICE_ENV}` must be the name of a Service (lower-case '
                         f'letters, digits and "-"), got {env[K8S_SERVICE_ENV]!r}')
    port = DEFAULT_K8S_PORT
    if env.get(K8S_PORT_ENV, '').strip():
        port = _slurm_int(env, K8S_PORT_ENV, minimum=1)
        if port > 65535:
            raise ValueError(f'`{K8S_PORT_ENV}` must be an int in 1..65535, '
                             f'got {env[K8S_PORT_ENV]!r}')
    job = env.get(K8S_JOB_NAME_ENV, '').strip()
    if not job:
        hostname = env.get('HOSTNAME', '').strip()
        suffix = f'-{index}'
        if not hostname.endswith(suffix) or len(hostname) == len(suffix):
            raise ValueError(
                f'`{K8S_JOB_NAME_ENV}` is not set and `HOSTNAME` ({hostname!r}) is not '
                f'`<job>-{index}`, the host name of pod {index} of an Indexed Job; set '
                f'`{K8S_JOB_NAME_ENV}` to the Job\'s name')
        job = hostname[:-len(suffix)]
    addresses = [f'{job}-{k}.{service}:{port}' for k in range(num_workers)]
    return ClusterInfo.of_task({'worker': addresses}, 'worker', index, 'kubernetes')


# ---------------------------------------------------------------------- SLURM
def _first_present(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        if env.get(name, '').strip():
            return name
    return None


def _slurm_int(env: Mapping[str, str], name: str, minimum: int) -> int:
    text = env[name].strip()
    if not (text.isascii() and text.isdigit()) or int(text) < minimum:
        raise ValueError(f'`{name}` must be an int >= {minimum}, got {env[name]!r}')
    return int(text)


def _tasks_per_node(text: str, name: str) -> list[int]:
    """Expand SLURM's compressed counts, e.g. ``'2(x3),1'`` -> ``[2, 2, 2, 1]``."""
    counts: list[int] = []
    for part in text.split(','):
        match = re.fullmatch(r'\s*(\d+)(?:\(x(\d+)\))?\s*', part)
        if match is None or int(match.group(1)) < 1:
            raise ValueError(f"`{name}` must look like '2(x3),1', got {text!r}")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts


def _from_slurm(env: Mapping[str, str], port_base: int) -> ClusterInfo:
    procid = _slurm_int(env, 'SLURM_PROCID', minimum=0)
    ntasks_name = _first_present(env, 'SLURM_STEP_NUM_TASKS', 'SLURM_NTASKS')
    nodes_name = _first_present(env, 'SLURM_STEP_NODELIST', 'SLURM_JOB_NODELIST',
                                'SLURM_NODELIST')
    if ntasks_name is None or nodes_name is None:
        missing = ('`SLURM_STEP_NUM_TASKS` (or `SLURM_NTASKS`)' if ntasks_name is None
                   else '`SLURM_STEP_NODELIST` (or `SLURM_JOB_NODELIST`)')
        raise ValueError(f'`SLURM_PROCID` is set but {missing} is not; start the tasks '
                         f'with `srun`, or unset `SLURM_PROCID`')
    ntasks = _slurm_int(env, ntasks_name, minimum=1)
    try:
        nodes = expand_hostlist(env[nodes_name])
    except ValueError as e:
        raise ValueError(f'`{nodes_name}` is not a valid hostlist: {e}') from e

    per_node_name = _first_present(env, 'SLURM_STEP_TASKS_PER_NODE', 'SLURM_TASKS_PER_NODE')
    if per_node_name is not None:
        counts = _tasks_per_node(env[per_node_name], per_node_name)
        if len(counts) != len(nodes) or sum(counts) != ntasks:
            raise ValueError(
                f'`{per_node_name}` is {env[per_node_name]!r} ({sum(counts)} tasks on '
                f'{len(counts)} nodes) but `{ntasks_name}` is {ntasks} and `{nodes_name}` '
                f'has {len(nodes)} nodes')
    elif ntasks % len(nodes) == 0:
        counts = [ntasks // len(nodes)] * len(nodes)
    else:
        raise ValueError(f'`{ntasks_name}` is {ntasks}, which does not split evenly over the '
                         f'{len(nodes)} nodes of `{nodes_name}`; set `SLURM_TASKS_PER_NODE`')
    if procid >= ntasks:
        raise ValueError(f'`SLURM_PROCID` is {procid} but `{ntasks_name}` is {ntasks}')
    if port_base + max(counts) - 1 > 65535:
        raise ValueError(f'`slurm_port` is {port_base}, too high for {max(counts)} tasks '
                         f'on one node')

    addresses = [f'{node}:{port_base + k}' for node, count in zip(nodes, counts)
                 for k in range(count)]
    own_node = env.get('SLURMD_NODENAME', '').strip()
    expected_node = addresses[procid].rsplit(':', 1)[0]
    if own_node and own_node != expected_node:
        raise ValueError(
            f'`SLURM_PROCID` {procid} belongs on node {expected_node!r} when tasks fill the '
            f'nodes in order, but `SLURMD_NODENAME` is {own_node!r}; '
            f'run `srun --distribution=block`')
    return ClusterInfo.of_task({'worker': addresses}, 'worker', procid, 'slurm')


def expand_hostlist(hostlist: str) -> list[str]:
    """Expand a SLURM hostlist such as ``'node[01-03,07],gpu5'`` into host names.

    Ranges keep the zero padding of their first bound; several bracket groups
    in one name multiply out, the first varying slowest.  Order and repeats
    are kept.

    Args:
        hostlist: The compressed list, as in ``SLURM_JOB_NODELIST``.

    Returns:
        The host names, in order.

    Raises:
        ValueError: `hostlist` is empty or malformed.

    Example:

        >>> from tfsnippet.distributed import expand_hostlist
        >>> expand_hostlist('node[01-03,07],gpu5')
        ['node01', 'node02', 'node03', 'node07', 'gpu5']
    """
    if not isinstance(hostlist, str) or not hostlist.strip():
        raise ValueError(f'`hostlist` must be a non-empty string, got {short_repr(hostlist)}')
    hosts: list[str] = []
    for name in _split_outside_brackets(hostlist.strip(), hostlist):
        hosts.extend(_expand_name(name, hostlist))
    return hosts


def _split_outside_brackets(text: str, whole: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == '[':
            depth += 1
        elif char == ']':
            depth -= 1
        elif char == ',' and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        if depth not in (0, 1):
            raise ValueError(f'unbalanced brackets in {whole!r}')
    if depth != 0:
        raise ValueError(f'unbalanced brackets in {whole!r}')
    parts.append(text[start:])
    if any(not p.strip() for p in parts):
        raise ValueError(f'empty host name in {whole!r}')
    return [p.strip() for p in parts]


def _expand_name(name: str, whole: str) -> list[str]:
    open_at = name.find('[')
    if open_at < 0:
        return [name]
    close_at = name.index(']', open_at)
    prefix, body, rest = name[:open_at], name[open_at + 1:close_at], name[close_at + 1:]
    suffixes = _expand_name(rest, whole) if rest else ['']
    numbers: list[str] = []
    for item in body.split(','):
        match = re.fullmatch(r'\s*(\d+)(?:-(\d+))?\s*', item)
        if match is None:
            raise ValueError(f'{item!r} in {whole!r} is not a number or a range like 1-3')
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise ValueError(f'range {item.strip()!r} in {whole!r} goes down')
        numbers.extend(str(n).zfill(len(low)) for n in range(int(low), int(high) + 1))
    return [prefix + n + s for n in numbers for s in suffixes]
