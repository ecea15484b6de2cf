package v2

// Hub marks v2 Book as the hub of conversion, as controller-runtime's
// conversion.Hub names it: every other version converts to and from v2
// (v1.Book.ConvertTo, v1.Book.ConvertFrom), never to each other, and v2 is
// the version the API server stores.
func (*Book) Hub() {}
