"""A trial script for the search's process tests, cheap to start.

With ``HANG_PIDFILE`` set, it writes its process id there and waits for a
signal (a long trial).  With ``NO_RUN`` set, it exits at once, recording no
run (the trial fails; its parameters were drawn all the same).  With ``LOOP``
set, a TrainLoop (no TensorFlow op) collects ``valid_loss = lr`` for two
epochs, and is pruned as the search's pruner says.  Otherwise its run records
``valid_loss = lr``.
"""

import os
import signal

pidfile = os.environ.get('HANG_PIDFILE')
if pidfile:
    with open(pidfile + '.tmp', 'w') as f:
        f.write(str(os.getpid()))
    os.replace(pidfile + '.tmp', pidfile)
    signal.pause()   # a long trial: until a signal ends it
elif not os.environ.get('NO_RUN'):
    import tfsnippet as spt

    class TinyConfig(spt.Config):
        lr = 0.1

    with spt.Experiment(TinyConfig, root='not-the-search-root') as exp:
        if os.environ.get('LOOP'):
            with spt.TrainLoop([], max_epoch=2) as loop:
                for _ in loop.iter_epochs():
                    for _ in loop.iter_steps(range(2)):
                        loop.collect_metrics(loss=exp.config.lr)
                    loop.collect_metrics(valid_loss=exp.config.lr)
        else:
            exp.results.update(valid_loss=exp.config.lr)
