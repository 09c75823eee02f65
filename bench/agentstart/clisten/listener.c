/* The same listener as ../floor in C, without a language runtime: what
 * runsc itself costs an init before it listens (bench/README.md, "A gVisor
 * init's start"). gcc -O2 -static -o /tmp/clisten listener.c */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void) {
	const char *addr = getenv("PT_AGENT_ADDR"); /* ":PORT" */
	int port = addr && addr[0] == ':' ? atoi(addr + 1) : 49983;
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 16))
		return 1;
	for (;;) {
		int c = accept(s, 0, 0);
		if (c < 0)
			return 1;
		close(c);
	}
}
