"""spt.Experiment with TF1 graph code: a run under an S3 root, with session.run.

The recorder and resume tests run in both styles in
tests/experiment/test_experiment.py.
"""

import tensorflow as tf

import tfsnippet as spt

v1 = tf.compat.v1


class RunConfig(spt.Config):
    max_epoch = 2
    lr = 0.1


def train(exp, session, w, step_op, loss, lines, clock):
    with spt.TrainLoop(max_epoch=exp.config.max_epoch, print_func=lines.append,
                       clock=clock) as loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(3)):
                clock.advance(0.25)
                loop.collect_metrics(loss=session.run(step_op) * 2.)
            loop.collect_metrics(valid_loss=1. / session.run(w))
            loop.print_logs()
        loop.collect_results(test_loss=session.run(loss))
    return loop


def make_job(session):
    w = v1.get_variable('w', shape=[], initializer=v1.zeros_initializer())
    step_op = v1.assign_add(w, 1.)
    loss = w * 2.
    session.run(v1.global_variables_initializer())
    return w, step_op, loss


def test_a_run_under_an_s3_root_records_into_the_bucket_and_resumes_from_it(
        session, s3_bucket, tmp_path, monkeypatch, fake_clock):
    # the twin of tests/storage/test_experiment_s3.py's loop test
    from tests.storage.test_experiment_s3 import checkpoints_of_run
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('TFSNIPPET_CACHE_DIR', str(tmp_path / 'cache'))
    root = f'{s3_bucket}/runs'
    w, step_op, loss = make_job(session)
    lines = []
    with spt.Experiment(RunConfig, root=root, name='g', args=[], hparams=False) as exp:
        train(exp, session, w, step_op, loss, lines, fake_clock)
    [row] = spt.results.query(root)
    assert (row.status, row.epoch, row.step, row.results) == ('completed', 2, 6,
                                                              {'test_loss': 12.})
    assert checkpoints_of_run(root, 'g', tmp_path)
    session.run(v1.assign(w, -100.))
    resumed = []
    with spt.Experiment(RunConfig, root=root, name='g', args=['--max_epoch', '3'],
                        hparams=False) as exp:
        loop = train(exp, session, w, step_op, loss, resumed, fake_clock)
    assert resumed[0].startswith('Resume training: epoch 2, step 6')
    assert (loop.epoch, session.run(w)) == (3, 9.)
