/* test_file: rt/file.h against a real directory: file_open_beneath stays below its directory
 * (".." and an absolute symlink are refused with -EXDEV, "" is the directory itself), and
 * file_read_all reads a file whole or says -EIO when it is shorter than asked.
 * Must not: leave anything behind in /tmp.
 * Ownership: each test makes and removes its own directory. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt/file.h"

static int make_dir(char dir[64])
{
    strcpy(dir, "/tmp/ringhttpd-file-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    char sub[96];
    snprintf(sub, sizeof(sub), "%s/root", dir);
    CHECK_INT(mkdir(sub, 0700), 0);
    int fd = open(sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(fd >= 0);
    return fd;
}

static void remove_dir(const char *dir, int root)
{
    close(root);
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK_INT(system(cmd), 0);
}

TEST(file_open_beneath_stays_below)
{
    char dir[64], path[128];
    int root = make_dir(dir);
    snprintf(path, sizeof(path), "%s/outside", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    close(fd);
    fd = openat(root, "inside", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    close(fd);
    CHECK_INT(symlinkat(path, root, "abs"), 0);
    CHECK_INT(symlinkat("inside", root, "rel"), 0);

    fd = file_open_beneath(root, "inside", O_NONBLOCK);
    CHECK(fd >= 0);
    CHECK_INT(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    CHECK_INT(fcntl(fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK), O_RDONLY | O_NONBLOCK);
    close(fd);
    fd = file_open_beneath(root, "rel", 0);
    CHECK(fd >= 0);
    close(fd);
    fd = file_open_beneath(root, "", O_DIRECTORY);
    CHECK(fd >= 0);
    close(fd);
    CHECK_INT(file_open_beneath(root, "../outside", 0), -EXDEV);
    CHECK_INT(file_open_beneath(root, "abs", 0), -EXDEV);
    CHECK_INT(file_open_beneath(root, path, 0), -EXDEV);
    CHECK_INT(file_open_beneath(root, "missing", 0), -ENOENT);
    CHECK_INT(file_open_beneath(root, "inside", O_DIRECTORY), -ENOTDIR);
    remove_dir(dir, root);
}

TEST(file_read_all_whole_or_eio)
{
    char dir[64], buf[16] = {0};
    int root = make_dir(dir);
    int fd = openat(root, "f", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    CHECK_INT(write(fd, "0123456789", 10), 10); /* the file offset now sits at the end */

    CHECK_INT(file_read_all(fd, buf, 10), 0);
    CHECK_MEM(buf, 10, "0123456789");
    CHECK_INT(file_read_all(fd, buf, 0), 0);
    CHECK_INT(file_read_all(fd, buf, 11), -EIO); /* shrank since a stat said 11 */
    CHECK_INT(lseek(fd, 0, SEEK_CUR), 10);       /* pread: the offset is untouched */
    close(fd);
    CHECK_INT(file_read_all(fd, buf, 1), -EBADF);
    remove_dir(dir, root);
}
