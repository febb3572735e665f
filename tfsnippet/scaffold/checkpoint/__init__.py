"""Checkpoints: what is saved (:mod:`.saver`, in the data-only format of
:mod:`.state_format`), where and how it is written (:mod:`.store`)."""

from .export import export_weights
from .io import AsyncSaveStats, CheckpointWriteError
from .saver import CheckpointError, CheckpointSavableObject, CheckpointSaver
from .state_format import UntrustedCheckpointError, convert_legacy_checkpoints
from .store import CheckpointStore
from .warm_start import WarmStartEntry, WarmStartReport, warm_start

__all__ = ['CheckpointError', 'CheckpointSavableObject', 'CheckpointSaver', 'CheckpointStore',
           'WarmStartEntry', 'WarmStartReport', 'warm_start', 'export_weights',
           'AsyncSaveStats', 'CheckpointWriteError', 'UntrustedCheckpointError',
           'convert_legacy_checkpoints']
