"""A hyperparameter search: Optuna trials as Experiment runs of the digits MLP, pruned early.

The model and the data are those of ``digits_sweep.py``; the config too.
Instead of three fixed learning rates, ``spt.Search`` asks Optuna (TPE, and
its median pruner) for ``--trials`` configs, two at a time (``--jobs``):

* each trial is an ordinary ``spt.Experiment`` run ``<root>/digits-search-tNNNN``
  (config, checkpoints, a row in ``<root>/results.sqlite``), its config given
  the suggested ``optimizer.lr``, ``optimizer.beta_1`` and ``batch_size``;
* the TrainLoop made in ``train(config)`` reports ``valid_loss`` to its trial
  at the end of each epoch with no extra code, and a trial clearly worse than
  the others at the same epoch is pruned: it saves, ends ``pruned``;
* running the script again continues the study kept beside the runs
  (``<root>/digits-search.optuna-journal``): finished trials are kept, a trial
  killed or preempted is resumed from its checkpoint;
* at the end: the best run's row, then the trials in the results store.

Run it from the repository root (``pip install ".[examples,optuna]"``)::

    python examples/digits_search.py --root runs/search --trials 8
    python -m tfsnippet.results runs/search list --order-by best.valid_loss
    optuna-dashboard runs/search/digits-search.optuna-journal   # pip install optuna-dashboard
"""

import argparse
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tfsnippet as spt  # noqa: E402


class SearchConfig(spt.Config):
    """Train an MLP on the scikit-learn digits: one trial of the search."""

    class optimizer(spt.Config):
        """Adam's settings."""

        lr = spt.ConfigField(float, 1e-3, 'the learning rate')
        beta_1 = spt.ConfigField(float, 0.9, 'the decay of the first moment estimates')

    max_epoch = spt.ConfigField(int, 8, 'the most epochs to train')
    batch_size = spt.ConfigField(int, 32, 'training batch size')
    seed = spt.ConfigField(int, 1234, 'seed of the data split, the shuffling and the weights')


def train(config):
    """One trial: builds and trains the MLP; the loop reports to the trial by itself."""
    import keras
    from _digits import evaluate, keras_eval_step, keras_mlp, keras_train_step, load_data

    keras.utils.set_random_seed(config.seed)
    (x_train, y_train), (x_valid, y_valid), _ = load_data(config.seed)
    model = keras_mlp()
    optimizer = keras.optimizers.Adam(learning_rate=config.optimizer.lr,
                                      beta_1=config.optimizer.beta_1)
    optimizer.build(model.trainable_variables)
    train_step, eval_step = keras_train_step(model, optimizer), keras_eval_step(model)
    flow = spt.DataFlow.arrays([x_train, y_train], config.batch_size, shuffle=True,
                               random_state=config.seed)
    with spt.TrainLoop(model.trainable_variables, max_epoch=config.max_epoch,
                       valid_metric_name='valid_loss',
                       checkpoint_save_objects={'model': model, 'optimizer': optimizer}) as loop:
        for _ in loop.iter_epochs():
            for _, (x, y) in loop.iter_steps(flow):
                loop.collect_metrics(loss=train_step(x, y))
            valid_loss, valid_acc = evaluate(eval_step, x_valid, y_valid)
            loop.collect_metrics(valid_loss=valid_loss, valid_acc=valid_acc)
            loop.print_logs()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--root', default=os.path.join('runs', 'digits_search'))
    parser.add_argument('--trials', type=int, default=8, help='trials of the study in all')
    parser.add_argument('--jobs', type=int, default=2, help='trials at once')
    parser.add_argument('--seed', type=int, default=0, help="the TPE sampler's seed")
    args = parser.parse_args()

    import optuna
    search = spt.Search(
        SearchConfig,
        space={'optimizer.lr': spt.search.Float(1e-4, 1e-1, log=True),
               'optimizer.beta_1': spt.search.Float(0.8, 0.99),
               'batch_size': spt.search.Categorical([32, 64, 128])},
        metric='valid_loss', direction='minimize', root=args.root, study='digits-search',
        sampler=optuna.samplers.TPESampler(seed=args.seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1))
    best = search.optimize(train, n_trials=args.trials, n_jobs=args.jobs)
    print(f'\nbest: {best.run_id}, valid_loss {best.best["valid_loss"]:.4f}, '
          f'optimizer.lr {best.config["optimizer"]["lr"]:.3g}, '
          f'optimizer.beta_1 {best.config["optimizer"]["beta_1"]:.3g}, '
          f'batch_size {best.config["batch_size"]}')
    rows = spt.results.query(args.root, where="config.trial.study = 'digits-search'",
                             order_by='config.trial.number')
    for row in rows:
        print(f'  trial {row.config["trial"]["number"]}: {row.status:9s} epochs {row.epoch}  '
              f'best valid_loss {row.best.get("valid_loss", float("nan")):.4f}')


if __name__ == '__main__':
    main()
