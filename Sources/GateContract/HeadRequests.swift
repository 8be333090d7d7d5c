package import HTTP1

extension HTTPRequestHead {
    /// The method a gateway-made answer is built for: HEAD is answered exactly as GET would be,
    /// and the connection then sends the head only. RFC 9110 8.6 forbids a Content-Length on a
    /// HEAD answer other than the GET's, so a message that names the method names GET.
    package var answeredMethod: String { self.method == "HEAD" ? "GET" : self.method }
}
