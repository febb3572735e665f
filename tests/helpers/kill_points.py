"""Pieces of the child scripts that kill themselves at one file-system call.

The store's crash tests run a small script in a child process, kill it with
SIGKILL at the N-th file operation and check what a restart finds.  Each
script is a string: these are the parts every such script shares, joined
into it with ``+``.
"""

#: Loads the store without TensorFlow: the package ``__init__`` files import it,
#: so they are replaced by empty packages.  Needs ``os``, ``sys``, ``types`` and
#: ``repo`` (the repository root) in the script.
STUB_PACKAGES = r'''
for package in ('tfsnippet', 'tfsnippet.utils', 'tfsnippet.scaffold',
                'tfsnippet.scaffold.checkpoint'):
    module = types.ModuleType(package)
    module.__path__ = [os.path.join(repo, *package.split('.'))]
    sys.modules[package] = module
'''

#: Defines ``point(name, args)``, one possible kill point: written to ``log_path``,
#: then the process dies if it is call number ``kill_at``; and makes every file
#: operation of ``os`` and ``shutil.rmtree`` such a point.  Needs ``json``, ``os``,
#: ``shutil``, ``signal``, ``kill_at`` and ``log_path`` in the script.
KILL_POINTS = r'''
log = open(log_path, 'w')
calls = 0


def point(name, args):
    global calls
    calls += 1
    log.write(json.dumps([name, [str(a) for a in args]]) + '\n')
    log.flush()
    if calls == int(kill_at):
        os.kill(os.getpid(), signal.SIGKILL)


def hook(module, name):
    original = getattr(module, name)

    def call(*args, **kwargs):
        point(name, args)
        return original(*args, **kwargs)
    setattr(module, name, call)


for name in ('mkdir', 'rename', 'replace', 'remove', 'unlink', 'rmdir', 'fsync'):
    hook(os, name)
hook(shutil, 'rmtree')
'''
