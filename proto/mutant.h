/* Runs in: shared */
/*
 * mutant.h - the mutation check's switches: test harness only.
 *
 * MUTANT(NAME) is the integer constant 1 in a build compiled with
 * -DMUTATE_NAME (or -DMUTATE_NAME=1), and 0 otherwise.  The code that owns a
 * hardening piece reads it in a plain `if`:
 *
 *     if (MUTANT(NO_SECCOMP))
 *         return 0;           // the mutant: no filter
 *
 * so that both branches are compiled and type-checked in every build, and a
 * normal build (which passes no such flag) folds the mutant's branch away.
 *
 * Only the mutation check, tests/mutation/run (`make mutation`), passes the
 * flags: it builds the daemon once per mutant, with that one piece switched
 * off, and requires some test to fail.  It lists every mutant by name and
 * fails when a name it lists appears in no MUTANT(...) of the sources, or a
 * MUTANT(...) names one it does not list.  No shipped build sets a flag.
 *
 * How (the Linux kernel's IS_ENABLED does the same): MUTATE_NAME, defined
 * as 1, expands to 1 and pastes into MUTANT_PROBE_1, which expands to an
 * extra first argument, so MUTANT_SECOND_ picks the 1; undefined, it pastes
 * into a name that is no macro, and MUTANT_SECOND_ picks the 0.
 */
#ifndef SANDBOXD_MUTANT_H
#define SANDBOXD_MUTANT_H

#define MUTANT(name)               MUTANT_VALUE_(MUTATE_##name)
#define MUTANT_VALUE_(flag)        MUTANT_PASTE_(flag)
#define MUTANT_PASTE_(flag)        MUTANT_TEST_(MUTANT_PROBE_##flag)
#define MUTANT_TEST_(probe)        MUTANT_SECOND_(probe 1, 0, ~)
#define MUTANT_PROBE_1             ~,
#define MUTANT_SECOND_(a, b, ...)  b

#endif
