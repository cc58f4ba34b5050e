/* atfork_order — fork handlers a program registers before bobbin starts.
 *
 * A handler registered from .preinit_array (as Chromium's allocator
 * registers its own at its first malloc, during ld.so's start-up) comes
 * before any library's constructor, bobbin's included; glibc runs prepare
 * handlers last-registered first. Here the prepare handler computes for
 * 30 ms (long enough to be preempted while two other threads compute) and
 * main forks 10 times; each child checks its child handler ran and exits
 * with its round's number. bobbin's own prepare handler, which takes the
 * scheduler's locks, ran before this one: the preempted forking thread
 * then waited for ever on those locks (Chromium headless hung at P=1 about
 * one run in seven). Prints the handler counts and the children's codes. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int nprepare, nparent;
static volatile int in_child;
static atomic_bool stop;

static void spin_ms(long ms)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

static void prepare(void)
{
	nprepare++;
	spin_ms(30);
}

static void parent(void)
{
	nparent++;
}

static void child(void)
{
	in_child = 1;
}

static void early(int argc, char **argv, char **envp)
{
	(void)argc, (void)argv, (void)envp;
	pthread_atfork(prepare, parent, child);
}
__attribute__((section(".preinit_array"), used)) static void (*const preinit)(int, char **, char **) = early;

static void *compute(void *arg)
{
	unsigned long x = (unsigned long)arg;
	while (!atomic_load(&stop))
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ul + 1442695040888963407ul;
	return (void *)(x | 1);
}

int main(void)
{
	pthread_t t[2];
	for (long i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, compute, (void *)(i + 1)) != 0)
			return 1;
	int codes = 0;
	for (int r = 1; r <= 10; r++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0)
			_exit(in_child ? r : 100);
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
			return 1;
		codes += WEXITSTATUS(st);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("prepare %d parent %d codes %d\n", nprepare, nparent, codes);
	return nprepare == 10 && nparent == 10 && codes == 55 ? 0 : 1;
}
