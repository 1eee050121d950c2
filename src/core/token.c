/* The tchar table; see token.h. */
#include "core/token.h"

const unsigned char token_tchar[256] = {
    /* 0x00 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    /* 0x10 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    /* 0x20 */ 0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, /* !#$%&'*+-. */
    /* 0x30 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, /* 0-9 */
    /* 0x40 */ 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* A-O */
    /* 0x50 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, /* P-Z ^_ */
    /* 0x60 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* ` a-o */
    /* 0x70 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0, /* p-z | ~ */
    /* 0x80..0xff: not tokens */
};

const bool token_field_name_char[256] = {
    ['a' ... 'z'] = true, ['0' ... '9'] = true, ['!'] = true,  ['#'] = true, ['$'] = true,
    ['%'] = true,         ['&'] = true,         ['\''] = true, ['*'] = true, ['+'] = true,
    ['-'] = true,         ['.'] = true,         ['^'] = true,  ['_'] = true, ['`'] = true,
    ['|'] = true,         ['~'] = true,
};

int token_b64(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}
