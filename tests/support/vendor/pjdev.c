/*
 * Table devices built from docs/register-maps.md and the shipped maps (config/devices/) alone: a seat
 * wagering sensor (PJ-SEAT-1, seat-single), a lock-out button (PJ-LOCKOUT-1, lockout) and a meter sign
 * (PJ-SIGN-3, sign), served over Modbus TCP by one process like a gateway (one unit id each).
 *
 *   pjdev [--host ADDR] [--port N] DEVICE...
 *   DEVICE: KIND:UNIT[,OPTION...]   KIND seat | lockout | sign
 *   OPTION: single-writes       (seat, lockout) exception 1 to functions 15 and 16
 *           write-only          (sign) exception 1 to reads of its holding registers (function 3)
 *           any-address         wrong: answers addresses outside its map instead of exception 2
 *           low-word-first      wrong: a seat's 32-bit amount with its low word first
 *           model=TEXT          wrong: reports another model in its identity block
 *
 * --port 0 (the default) takes a free port. The first line on standard output is "listening PORT".
 * Standard input takes one command a line, each answered with one line:
 *   place UNIT CENTS   a chip of that value on the seat's spot        -> ok
 *   lift UNIT          the chip taken off                             -> ok
 *   press UNIT         the lock-out button pressed once               -> ok
 *   reboot UNIT        a power cycle: outputs and press counter to 0  -> ok
 *   swap UNIT MODEL    another device, saying MODEL, put at the unit   -> ok
 *   unplug UNIT        no answer at all from the unit                  -> ok
 *   plug UNIT          back, from power-on                             -> ok
 *   dump               what every device shows, one JSON line
 *   quit               exit
 * An unknown or malformed command answers "error: ..." and changes nothing.
 */
#include <errno.h>
#include <modbus.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_UNITS 16
#define MAX_CLIENTS 32
#define SPACE 65536 /* every address of a table, so that the map, not the mapping, decides what exists */

enum kind { SEAT, LOCKOUT, SIGN };
enum table { COIL, DISCRETE_INPUT, HOLDING_REGISTER, INPUT_REGISTER, NO_TABLE };

/* Where the identity block is (every shipped map with one: input registers 4096-4103). */
#define IDENT_ADDR 4096
#define IDENT_LEN 8

struct range { enum table table; int start, count; };

struct unit {
    int id;
    enum kind kind;
    const char *model;
    int single_writes, write_only, any_address, low_word_first;
    int muted; /* unplugged: no answer at all */
    /* inputs the device senses */
    int present;
    uint32_t amount; /* cents */
    uint16_t presses;
    uint16_t shown[8]; /* the sign's message as displayed: registers 16-23 when the code was last written */
    modbus_mapping_t *mb;
    long requests[128];
    long exceptions[128];
};

static struct unit units[MAX_UNITS];
static int n_units;

/* The maps, as docs/register-maps.md and the shipped map files give them. */
static const struct range seat_map[] = {
    {INPUT_REGISTER, 0, 3},            /* 0 chip present, 1-2 amount in cents, high word first */
    {COIL, 0, 2},                      /* 0 accepted light, 1 win light */
    {INPUT_REGISTER, IDENT_ADDR, IDENT_LEN},
};
static const struct range lockout_map[] = {
    {INPUT_REGISTER, 0, 1},            /* press counter */
    {COIL, 0, 1},                      /* lamp */
    {INPUT_REGISTER, IDENT_ADDR, IDENT_LEN},
};
static const struct range sign_map[] = {
    {HOLDING_REGISTER, 0, 6},          /* slots 1-3, uint32 cents, high word first */
    {HOLDING_REGISTER, 16, 8},         /* code, seat, amount (2), table (4 registers, 8 characters) */
    {INPUT_REGISTER, IDENT_ADDR, IDENT_LEN},
};

static void map_of(const struct unit *u, const struct range **r, int *n)
{
    switch (u->kind) {
    case SEAT: *r = seat_map; *n = 3; break;
    case LOCKOUT: *r = lockout_map; *n = 3; break;
    default: *r = sign_map; *n = 3; break;
    }
}

static int uses_table(const struct unit *u, enum table t)
{
    const struct range *r;
    int n;
    map_of(u, &r, &n);
    for (int i = 0; i < n; i++)
        if (r[i].table == t)
            return 1;
    return 0;
}

/* Every address of [start, start + count) is in the map. */
static int mapped(const struct unit *u, enum table t, int start, int count)
{
    const struct range *r;
    int n;
    map_of(u, &r, &n);
    for (int a = start; a < start + count; a++) {
        int found = 0;
        for (int i = 0; i < n && !found; i++)
            found = r[i].table == t && a >= r[i].start && a < r[i].start + r[i].count;
        if (!found)
            return 0;
    }
    return 1;
}

static enum table table_of(int fc)
{
    switch (fc) {
    case 1: case 5: case 15: return COIL;
    case 2: return DISCRETE_INPUT;
    case 3: case 6: case 16: return HOLDING_REGISTER;
    case 4: return INPUT_REGISTER;
    default: return NO_TABLE;
    }
}

static struct unit *find_unit(int id)
{
    for (int i = 0; i < n_units; i++)
        if (units[i].id == id)
            return &units[i];
    return NULL;
}

/* The input registers from what the device senses, just before a read. */
static void refresh_inputs(struct unit *u)
{
    uint16_t *ir = u->mb->tab_input_registers;
    if (u->kind == SEAT) {
        uint16_t hi = (uint16_t)(u->amount >> 16), lo = (uint16_t)(u->amount & 0xffff);
        ir[0] = u->present ? 1 : 0;
        ir[1] = u->low_word_first ? lo : hi;
        ir[2] = u->low_word_first ? hi : lo;
    } else if (u->kind == LOCKOUT) {
        ir[0] = u->presses;
    }
    /* identity: two characters a register, the first in the high byte, padded with zeros */
    size_t len = strlen(u->model);
    for (int i = 0; i < IDENT_LEN; i++) {
        size_t k = 2 * (size_t)i;
        uint8_t a = k < len ? (uint8_t)u->model[k] : 0, b = k + 1 < len ? (uint8_t)u->model[k + 1] : 0;
        ir[IDENT_ADDR + i] = (uint16_t)(a << 8 | b);
    }
}

/* The exception this request gets (0: none), in the order of the Modbus application protocol's state
 * diagrams: the function (1), the quantity (3), the addresses (2). */
static int check_request(const struct unit *u, const uint8_t *pdu, int pdu_len)
{
    int fc = pdu[0];
    enum table t = table_of(fc);
    if (t == NO_TABLE || !uses_table(u, t))
        return MODBUS_EXCEPTION_ILLEGAL_FUNCTION;
    if ((fc == 15 || fc == 16) && u->single_writes)
        return MODBUS_EXCEPTION_ILLEGAL_FUNCTION;
    if (fc == 3 && u->write_only)
        return MODBUS_EXCEPTION_ILLEGAL_FUNCTION;
    if (pdu_len < 5)
        return MODBUS_EXCEPTION_ILLEGAL_DATA_VALUE;
    int addr = pdu[1] << 8 | pdu[2];
    int count = pdu[3] << 8 | pdu[4];
    switch (fc) {
    case 1: case 2:
        if (count < 1 || count > MODBUS_MAX_READ_BITS) return MODBUS_EXCEPTION_ILLEGAL_DATA_VALUE;
        break;
    case 3: case 4:
        if (count < 1 || count > MODBUS_MAX_READ_REGISTERS) return MODBUS_EXCEPTION_ILLEGAL_DATA_VALUE;
        break;
    case 5:
        if (count != 0xff00 && count != 0) return MODBUS_EXCEPTION_ILLEGAL_DATA_VALUE;
        count = 1;
        break;
    case 6:
        count = 1;
        break;
    case 15:
        if (count < 1 || count > MODBUS_MAX_WRITE_BITS || pdu_len < 6 || pdu[5] != (count + 7) / 8
            || pdu_len < 6 + pdu[5])
            return MODBUS_EXCEPTION_ILLEGAL_DATA_VALUE;
        break;
    case 16:
        if (count < 1 || count > MODBUS_MAX_WRITE_REGISTERS || pdu_len < 6 || pdu[5] != 2 * count
            || pdu_len < 6 + pdu[5])
            return MODBUS_EXCEPTION_ILLEGAL_DATA_VALUE;
        break;
    }
    if (addr + count > SPACE)
        return MODBUS_EXCEPTION_ILLEGAL_DATA_ADDRESS;
    if (!u->any_address && !mapped(u, t, addr, count))
        return MODBUS_EXCEPTION_ILLEGAL_DATA_ADDRESS;
    return 0;
}

static void serve(modbus_t *ctx, const uint8_t *req, int len)
{
    int hl = modbus_get_header_length(ctx); /* 7 on TCP: the MBAP header, the unit id last */
    if (len <= hl)
        return;
    struct unit *u = find_unit(req[hl - 1]);
    if (u == NULL || u->muted)
        return; /* no such device behind this gateway (or unplugged): no answer, as on a bus */
    int fc = req[hl];
    u->requests[fc & 127]++;
    int ex = check_request(u, req + hl, len - hl); /* TCP: no checksum after the PDU */
    if (ex) {
        u->exceptions[fc & 127]++;
        modbus_reply_exception(ctx, req, (unsigned)ex);
        return;
    }
    refresh_inputs(u);
    if (modbus_reply(ctx, req, len, u->mb) < 0)
        return;
    int addr = req[hl + 1] << 8 | req[hl + 2], count = fc == 16 ? (req[hl + 3] << 8 | req[hl + 4]) : 1;
    if (u->kind == SIGN && (fc == 6 || fc == 16) && addr <= 16 && 16 < addr + count) {
        /* a message is shown when its code is written, with the fields written before it (or with it) */
        memcpy(u->shown, u->mb->tab_registers + 16, sizeof u->shown);
        if (u->shown[0] > 4)
            u->shown[0] = 0; /* a code this sign does not know: no message */
    }
}

static void power_on(struct unit *u)
{
    memset(u->mb->tab_bits, 0, SPACE);
    memset(u->mb->tab_registers, 0, SPACE * sizeof(uint16_t));
    memset(u->shown, 0, sizeof u->shown);
    u->presses = 0;
}

static uint32_t u32(const uint16_t *r) { return (uint32_t)r[0] << 16 | r[1]; }

static void dump(void)
{
    printf("{");
    for (int i = 0; i < n_units; i++) {
        struct unit *u = &units[i];
        const uint8_t *co = u->mb->tab_bits;
        const uint16_t *hr = u->mb->tab_registers;
        printf("%s\"%d\": {", i ? ", " : "", u->id);
        if (u->kind == SEAT) {
            printf("\"kind\": \"seat\", \"present\": %s, \"amount\": %u, \"accepted\": %s, \"win\": %s",
                   u->present ? "true" : "false", u->amount, co[0] ? "true" : "false", co[1] ? "true" : "false");
        } else if (u->kind == LOCKOUT) {
            printf("\"kind\": \"lockout\", \"presses\": %u, \"lamp\": %s", u->presses, co[0] ? "true" : "false");
        } else {
            const uint16_t *m = u->shown;
            char table[9];
            for (int k = 0; k < 4; k++) {
                table[2 * k] = (char)(m[4 + k] >> 8);
                table[2 * k + 1] = (char)(m[4 + k] & 0xff);
            }
            table[8] = 0;
            for (int k = 0; k < 8; k++) /* printable ASCII only in the JSON line */
                if (table[k] && (table[k] < 32 || table[k] > 126 || table[k] == '"' || table[k] == '\\'))
                    table[k] = '?';
            printf("\"kind\": \"sign\", \"slots\": [%u, %u, %u], \"message\": {\"code\": %u, \"seat\": %u, "
                   "\"amount\": %u, \"table\": \"%s\"}",
                   u32(hr + 0), u32(hr + 2), u32(hr + 4), m[0], m[1], u32(m + 2), table);
        }
        printf(", \"requests\": {");
        int first = 1;
        for (int fc = 0; fc < 128; fc++)
            if (u->requests[fc]) {
                printf("%s\"%d\": %ld", first ? "" : ", ", fc, u->requests[fc]);
                first = 0;
            }
        printf("}, \"exceptions\": {");
        first = 1;
        for (int fc = 0; fc < 128; fc++)
            if (u->exceptions[fc]) {
                printf("%s\"%d\": %ld", first ? "" : ", ", fc, u->exceptions[fc]);
                first = 0;
            }
        printf("}}");
    }
    printf("}\n");
}

/* One command line from the test (or a person); one line back. */
static int command(char *line)
{
    char verb[16];
    int unit = -1;
    unsigned long long cents = 0;
    int n = sscanf(line, "%15s %d %llu", verb, &unit, &cents);
    if (n < 1)
        return 1;
    if (strcmp(verb, "quit") == 0)
        return 0;
    if (strcmp(verb, "dump") == 0) {
        dump();
        return 1;
    }
    struct unit *u = n >= 2 ? find_unit(unit) : NULL;
    if (u == NULL) {
        printf("error: %s: no unit %d\n", verb, unit);
    } else if (strcmp(verb, "place") == 0) {
        if (u->kind != SEAT || n != 3 || cents == 0 || cents > 0xffffffffULL) {
            printf("error: place UNIT CENTS: a seat and 1 to 4294967295 cents\n");
        } else {
            u->amount = (uint32_t)cents; /* one step between two requests: no read sees half of it */
            u->present = 1;
            printf("ok\n");
        }
    } else if (strcmp(verb, "lift") == 0 && u->kind == SEAT) {
        u->present = 0;
        u->amount = 0;
        printf("ok\n");
    } else if (strcmp(verb, "press") == 0 && u->kind == LOCKOUT) {
        u->presses++; /* wraps at 65536 */
        printf("ok\n");
    } else if (strcmp(verb, "swap") == 0) {
        char model[64];
        if (sscanf(line, "%*s %*d %63s", model) != 1) {
            printf("error: swap UNIT MODEL\n");
        } else {
            u->model = strdup(model); /* another device at the unit id, from power-on */
            power_on(u);
            printf("ok\n");
        }
    } else if (strcmp(verb, "unplug") == 0) {
        u->muted = 1;
        printf("ok\n");
    } else if (strcmp(verb, "plug") == 0) {
        u->muted = 0; /* back from power-on */
        power_on(u);
        printf("ok\n");
    } else if (strcmp(verb, "reboot") == 0) {
        power_on(u);
        printf("ok\n");
    } else {
        printf("error: %s: not a command for unit %d\n", verb, unit);
    }
    return 1;
}

static int add_device(const char *spec)
{
    char buf[256];
    if (n_units == MAX_UNITS || strlen(spec) >= sizeof buf)
        return -1;
    strcpy(buf, spec);
    char *colon = strchr(buf, ':');
    if (colon == NULL)
        return -1;
    *colon = 0;
    struct unit *u = &units[n_units];
    memset(u, 0, sizeof *u);
    if (strcmp(buf, "seat") == 0) { u->kind = SEAT; u->model = "PJ-SEAT-1"; }
    else if (strcmp(buf, "lockout") == 0) { u->kind = LOCKOUT; u->model = "PJ-LOCKOUT-1"; }
    else if (strcmp(buf, "sign") == 0) { u->kind = SIGN; u->model = "PJ-SIGN-3"; }
    else return -1;
    char *opt = strtok(colon + 1, ",");
    char *end;
    long id = opt ? strtol(opt, &end, 10) : -1;
    if (opt == NULL || *end || id < 0 || id > 255 || find_unit((int)id))
        return -1;
    u->id = (int)id;
    while ((opt = strtok(NULL, ",")) != NULL) {
        if (strcmp(opt, "single-writes") == 0) u->single_writes = 1;
        else if (strcmp(opt, "write-only") == 0) u->write_only = 1;
        else if (strcmp(opt, "any-address") == 0) u->any_address = 1;
        else if (strcmp(opt, "low-word-first") == 0) u->low_word_first = 1;
        else if (strncmp(opt, "model=", 6) == 0) u->model = strdup(opt + 6);
        else return -1;
    }
    u->mb = modbus_mapping_new(SPACE, SPACE, SPACE, SPACE);
    if (u->mb == NULL)
        return -1;
    power_on(u);
    n_units++;
    return 0;
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    int port = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--host") == 0 && i + 1 < argc) host = argv[++i];
        else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) port = atoi(argv[++i]);
        else if (add_device(argv[i]) != 0) {
            fprintf(stderr, "pjdev: %s: not a device (KIND:UNIT[,OPTION...], KIND seat, lockout or sign)\n", argv[i]);
            return 2;
        }
    }
    if (n_units == 0) {
        fprintf(stderr, "usage: pjdev [--host ADDR] [--port N] KIND:UNIT[,OPTION...]...\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    modbus_t *ctx = modbus_new_tcp(host, port);
    if (ctx == NULL) {
        fprintf(stderr, "pjdev: %s\n", modbus_strerror(errno));
        return 1;
    }
    int server = modbus_tcp_listen(ctx, MAX_CLIENTS);
    if (server < 0) {
        fprintf(stderr, "pjdev: listen on %s:%d: %s\n", host, port, modbus_strerror(errno));
        return 1;
    }
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    getsockname(server, (struct sockaddr *)&sa, &sl);
    printf("listening %d\n", ntohs(sa.sin_port));

    int clients[MAX_CLIENTS];
    int n_clients = 0;
    char line[512];
    size_t have = 0;
    uint8_t req[MODBUS_TCP_MAX_ADU_LENGTH];
    for (;;) {
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(0, &rd);
        FD_SET(server, &rd);
        int maxfd = server;
        for (int i = 0; i < n_clients; i++) {
            FD_SET(clients[i], &rd);
            if (clients[i] > maxfd) maxfd = clients[i];
        }
        if (select(maxfd + 1, &rd, NULL, NULL, NULL) < 0) {
            if (errno == EINTR) continue;
            perror("pjdev: select");
            return 1;
        }
        if (FD_ISSET(server, &rd)) {
            int fd = accept(server, NULL, NULL);
            if (fd >= 0 && n_clients < MAX_CLIENTS) clients[n_clients++] = fd;
            else if (fd >= 0) close(fd);
        }
        for (int i = 0; i < n_clients; i++) {
            if (!FD_ISSET(clients[i], &rd)) continue;
            modbus_set_socket(ctx, clients[i]);
            int rc = modbus_receive(ctx, req);
            if (rc > 6) {
                /* libmodbus reads a request as long as its function code says, and knows none for the codes it
                 * does not implement (24 has two more bytes): take the rest that the MBAP header's length says,
                 * or it would be read as the start of the next request */
                int whole = 6 + (req[4] << 8 | req[5]);
                if (whole > rc && whole <= (int)sizeof req
                    && recv(clients[i], req + rc, (size_t)(whole - rc), MSG_WAITALL) == whole - rc)
                    rc = whole;
            }
            if (rc > 0) {
                serve(ctx, req, rc);
            } else if (rc < 0) { /* closed by the master, or a frame that is not Modbus TCP */
                close(clients[i]);
                clients[i--] = clients[--n_clients];
            }
        }
        if (FD_ISSET(0, &rd)) {
            ssize_t r = read(0, line + have, sizeof line - 1 - have);
            if (r <= 0) return 0; /* standard input closed: the test is gone */
            have += (size_t)r;
            line[have] = 0;
            char *nl;
            while ((nl = strchr(line, '\n')) != NULL) {
                *nl = 0;
                if (!command(line)) return 0;
                have -= (size_t)(nl + 1 - line);
                memmove(line, nl + 1, have + 1);
            }
            if (have == sizeof line - 1) have = 0; /* a line too long: dropped */
        }
    }
}
