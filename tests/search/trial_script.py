"""An ordinary spt.Experiment script: the trial of the command-line tests.

With ``PREEMPT_TRIAL=N``, trial N sends itself SIGTERM after its first epoch
(as a scheduler would), unless it is resumed.
"""

import os
import signal

import tfsnippet as spt
from tests.search.digits import DigitsConfig, train

with spt.Experiment(DigitsConfig, root='not-the-search-root') as exp:
    preempt = (os.environ.get('PREEMPT_TRIAL') == os.environ.get('TFSNIPPET_SEARCH_TRIAL')
               and not exp.resumed)

    def on_epoch(loop, epoch):
        if preempt and epoch == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    train(exp.config, on_epoch)
