# test_nowait counts the library's calls that could do I/O or wait inside DWUNW_REGS_NOWAIT
# captures: it is linked with a wrapper for each (-Wl,--wrap; the wrappers are in the test).
comma := ,
NOWAIT_WRAP := $(addprefix -Wl$(comma)--wrap=,open read pread stat fstat access realpath \
               pthread_mutex_lock nanosleep waitpid ptrace)
