#ifndef MEMSNAP_SYMBOLS_DEMANGLE_H
#define MEMSNAP_SYMBOLS_DEMANGLE_H

/*
 * Demangle a C++ (Itanium ABI) or Rust (legacy and v0) symbol name with
 * libiberty's demangler, parameters included:
 *
 *   _ZN2ns6Widget4makeEi                    ns::Widget::make(int)
 *   _ZN4core3fmt9Formatter3pad17h0123..E    core::fmt::Formatter::pad
 *   _RNvCs1234_7mycrate3foo                 mycrate::foo
 *
 * Returns a malloc'ed string the caller frees, or NULL when @name is not
 * mangled (use it as it is) or memory ran out.
 */
char *demangle(const char *name);

#endif
