"""Checkpoints: what is saved (:mod:`.saver`, in the data-only format of
:mod:`.state_format`), where and how it is written and what is kept (:mod:`.store`,
:mod:`.policies`), and how the loop resumes (:mod:`.restore`)."""

from .export import export_weights
from .io import AsyncSaveStats, CheckpointWriteError
from .policies import KeepBest, KeepEveryNth, KeepLatest, SaveAtEnd, SaveEvery
from .saver import CheckpointError, CheckpointSavableObject, CheckpointSaver
from .state_format import CheckpointMismatchError, UntrustedCheckpointError, convert_legacy_checkpoints
from .store import CheckpointStore
from .warm_start import WarmStartEntry, WarmStartReport, warm_start

__all__ = ['CheckpointError', 'CheckpointMismatchError', 'CheckpointSavableObject', 'CheckpointSaver', 'CheckpointStore',
           'WarmStartEntry', 'WarmStartReport', 'warm_start', 'export_weights',
           'AsyncSaveStats', 'CheckpointWriteError', 'KeepLatest', 'KeepBest', 'KeepEveryNth',
           'SaveEvery', 'SaveAtEnd', 'UntrustedCheckpointError', 'convert_legacy_checkpoints']
