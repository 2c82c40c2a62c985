/* Preloaded into a server (LD_PRELOAD) that does not set TCP_NODELAY on the connections it
 * accepts: sets it on every socket accept() or accept4() returns. s3s-fs 0.14.1 leaves
 * Nagle's algorithm on, so on a connection the client reuses the last bytes of an answer
 * wait for the client's delayed ACK: about 40 ms per request on Linux, whatever its size
 * (tests/s3/run_s3s.sh, S3S_NODELAY=1). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static int nodelay(int fd) {
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

int accept4(int s, struct sockaddr *addr, socklen_t *len, int flags) {
    static int (*real)(int, struct sockaddr *, socklen_t *, int);
    if (!real)
        real = (int (*)(int, struct sockaddr *, socklen_t *, int))dlsym(RTLD_NEXT, "accept4");
    return nodelay(real(s, addr, len, flags));
}

int accept(int s, struct sockaddr *addr, socklen_t *len) {
    static int (*real)(int, struct sockaddr *, socklen_t *);
    if (!real)
        real = (int (*)(int, struct sockaddr *, socklen_t *))dlsym(RTLD_NEXT, "accept");
    return nodelay(real(s, addr, len));
}
