/// Chains under a throwaway test root, for the checks no real chain reaches once Google's root
/// is pinned (a leaf without RootOfTrust, a KeyDescription on a CA, ...). Made once with Python
/// `cryptography` (EC P-256, SHA-256, valid 2026-01-01 to 2035-12-30; the private keys were
/// discarded); the KeyDescriptions are attestation version 400, TEE/TEE unless the name says
/// otherwise, hardwareEnforced purpose SIGN, EC P-256, origin GENERATED, a RootOfTrust (Verified,
/// locked), OS 16, patch 2026-09; challenge "synthetic". Leaf first, root last.
enum AndroidSyntheticChains {
    static let root = """
        -----BEGIN CERTIFICATE-----
        MIIBUTCB96ADAgECAhRacOHP8/Iu7oDe2nzPEokKzstZWTAKBggqhkjOPQQDAjAe
        MRwwGgYDVQQDDBNTeW50aGV0aWMgVGVzdCBSb290MB4XDTI2MDEwMTAwMDAwMFoX
        DTM1MTIzMDAwMDAwMFowHjEcMBoGA1UEAwwTU3ludGhldGljIFRlc3QgUm9vdDBZ
        MBMGByqGSM49AgEGCCqGSM49AwEHA0IABH8kwJvnOBYByrZOk7RaZFDf2Xi/VaIf
        sk2ju8uBmk/DKeOGB4EXm3b5x6nzu38X8N2TVPw62NVX9ATtFDZCMBOjEzARMA8G
        A1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhAP89WBnJoEUg5RQwTBxu
        rNqtZephKKI8BohlvSuJ894KAiEA7zj2DUMhN9RzKTn+4Ou3Nz0k+UIUjfy3WwL7
        sSwMbrU=
        -----END CERTIFICATE-----
        """

    /// The intermediate under `root` that signs most leaves here.
    static let batch = """
        -----BEGIN CERTIFICATE-----
        MIIBTTCB86ADAgECAhRC+iny+6DiPkvctI/lr9RX8IDUtTAKBggqhkjOPQQDAjAe
        MRwwGgYDVQQDDBNTeW50aGV0aWMgVGVzdCBSb290MB4XDTI2MDEwMTAwMDAwMFoX
        DTM1MTIzMDAwMDAwMFowGjEYMBYGA1UEAwwPU3ludGhldGljIEJhdGNoMFkwEwYH
        KoZIzj0CAQYIKoZIzj0DAQcDQgAEfsWSljuZY+QR/aklIGbx6MSWmmlVFHHEOsFD
        a72Dh9vCfARtO3hSCyE0+OVVWggHRlz9A2PyqaaubAszyu1OnqMTMBEwDwYDVR0T
        AQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEAl+v5t7AQo3qnDHN+fAxacwo1
        1RVcDHBNituy373/uhUCIQDaPSAoGR23BPW6aXpTo3lg0DkbRGxisymhbJ8Q7YHM
        Mg==
        -----END CERTIFICATE-----
        """

    static let good = """
        -----BEGIN CERTIFICATE-----
        MIICATCCAaagAwIBAgIUJvo5GlYWmOWXMRJeMj0QsY+J5EwwCgYIKoZIzj0EAwIw
        GjEYMBYGA1UEAwwPU3ludGhldGljIEJhdGNoMB4XDTI2MDEwMTAwMDAwMFoXDTM1
        MTIzMDAwMDAwMFowHzEdMBsGA1UEAwwUQW5kcm9pZCBLZXlzdG9yZSBLZXkwWTAT
        BgcqhkjOPQIBBggqhkjOPQMBBwNCAATmALZ+KEN5/qXUF0f17gkUWPILpUNdAP5u
        QjN05q1Vy0iu6VqgoGF62WKUExUu+t2u32XEyov7ySv4mqdD1Ryio4HEMIHBMIG+
        BgorBgEEAdZ5AgERBIGvMIGsAgIBkAoBAQICAZAKAQEECXN5bnRoZXRpYwQAMAy/
        hT0IAgYBm3baqAAwgYChBTEDAgECogMCAQOjBAICAQCqAwIBAb+FPgMCAQC/hUBM
        MEoEIKurq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urAQH/CgEABCDNzc3N
        zc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzb+FQQUCAwJxAL+FQgUCAwMXcTAK
        BggqhkjOPQQDAgNJADBGAiEAt3Q5TWC/C3p4Tr+2pWLjxJefvwQUEZdY+buu7GGl
        QOQCIQDiX4mg4xaSxfKOOzeSMTUqjNQA9HbRAzpe2rxVjIHycA==
        -----END CERTIFICATE-----
        \(Self.batch)
        \(Self.root)
        """

    static let noRootOfTrust = """
        -----BEGIN CERTIFICATE-----
        MIIBqzCCAVCgAwIBAgIUXzBaVMDzV70YKXwJB5dbA23KI0cwCgYIKoZIzj0EAwIw
        GjEYMBYGA1UEAwwPU3ludGhldGljIEJhdGNoMB4XDTI2MDEwMTAwMDAwMFoXDTM1
        MTIzMDAwMDAwMFowHzEdMBsGA1UEAwwUQW5kcm9pZCBLZXlzdG9yZSBLZXkwWTAT
        BgcqhkjOPQIBBggqhkjOPQMBBwNCAATmALZ+KEN5/qXUF0f17gkUWPILpUNdAP5u
        QjN05q1Vy0iu6VqgoGF62WKUExUu+t2u32XEyov7ySv4mqdD1Ryio28wbTBrBgor
        BgEEAdZ5AgERBF0wWwICAZAKAQECAgGQCgEBBAlzeW50aGV0aWMEADAMv4U9CAIG
        AZt22qgAMDChBTEDAgECogMCAQOjBAICAQCqAwIBAb+FPgMCAQC/hUEFAgMCcQC/
        hUIFAgMDF3EwCgYIKoZIzj0EAwIDSQAwRgIhAMIACxP2St/QcfivvF63Banguh6K
        WgSBNwXWdIITc3l5AiEA4kOn0FFY8I4dPI+17vlXqEJsAs11Pm7D7gGPSzJUhvo=
        -----END CERTIFICATE-----
        \(Self.batch)
        \(Self.root)
        """

    static let levelMismatch = """
        -----BEGIN CERTIFICATE-----
        MIICADCCAaagAwIBAgIUSXKa//Pt+syqJLliuTVUpKICgK0wCgYIKoZIzj0EAwIw
        GjEYMBYGA1UEAwwPU3ludGhldGljIEJhdGNoMB4XDTI2MDEwMTAwMDAwMFoXDTM1
        MTIzMDAwMDAwMFowHzEdMBsGA1UEAwwUQW5kcm9pZCBLZXlzdG9yZSBLZXkwWTAT
        BgcqhkjOPQIBBggqhkjOPQMBBwNCAATmALZ+KEN5/qXUF0f17gkUWPILpUNdAP5u
        QjN05q1Vy0iu6VqgoGF62WKUExUu+t2u32XEyov7ySv4mqdD1Ryio4HEMIHBMIG+
        BgorBgEEAdZ5AgERBIGvMIGsAgIBkAoBAQICAZAKAQIECXN5bnRoZXRpYwQAMAy/
        hT0IAgYBm3baqAAwgYChBTEDAgECogMCAQOjBAICAQCqAwIBAb+FPgMCAQC/hUBM
        MEoEIKurq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urAQH/CgEABCDNzc3N
        zc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzb+FQQUCAwJxAL+FQgUCAwMXcTAK
        BggqhkjOPQQDAgNIADBFAiEAjb8tPM03qIcfA69lQMTf508Ly3sMW0Zh7WIF9bQ5
        zOgCIEwm+TlOPuZHD4v4I6Ed8qgHXsT2M+oyrxsHuaye4J0N
        -----END CERTIFICATE-----
        \(Self.batch)
        \(Self.root)
        """

    static let misplaced = """
        -----BEGIN CERTIFICATE-----
        MIIB/zCCAaagAwIBAgIUTUP5vgood3s1lO6EMcdklIVMsQcwCgYIKoZIzj0EAwIw
        GjEYMBYGA1UEAwwPU3ludGhldGljIEJhdGNoMB4XDTI2MDEwMTAwMDAwMFoXDTM1
        MTIzMDAwMDAwMFowHzEdMBsGA1UEAwwUQW5kcm9pZCBLZXlzdG9yZSBLZXkwWTAT
        BgcqhkjOPQIBBggqhkjOPQMBBwNCAATmALZ+KEN5/qXUF0f17gkUWPILpUNdAP5u
        QjN05q1Vy0iu6VqgoGF62WKUExUu+t2u32XEyov7ySv4mqdD1Ryio4HEMIHBMIG+
        BgorBgEEAdZ5AgERBIGvMIGsAgIBkAoBAQICAZAKAQEECXN5bnRoZXRpYwQAMAy/
        hT0IAgYBm3baqAAwgYChBTEDAgECogMCAQOjBAICAQCqAwIBAb+FPgMCAQC/hUBM
        MEoEIKurq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urAQH/CgEABCDNzc3N
        zc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzb+FQQUCAwJxAL+FQgUCAwMXcTAK
        BggqhkjOPQQDAgNHADBEAiAliXOwsw6crmG0VsrYEi86G9A5SxM7Uex7bf1JPqbv
        pAIgHiT776TZhWyYebi7acass+ITbkUpq1vPa2NIrYEhgeY=
        -----END CERTIFICATE-----
        -----BEGIN CERTIFICATE-----
        MIIBRjCB7aADAgECAhROl4x6osnnLOuuul6n414BXF7DxjAKBggqhkjOPQQDAjAY
        MRYwFAYDVQQDDA1TeW50aGV0aWMgTWlkMB4XDTI2MDEwMTAwMDAwMFoXDTM1MTIz
        MDAwMDAwMFowGjEYMBYGA1UEAwwPU3ludGhldGljIEJhdGNoMFkwEwYHKoZIzj0C
        AQYIKoZIzj0DAQcDQgAEfsWSljuZY+QR/aklIGbx6MSWmmlVFHHEOsFDa72Dh9vC
        fARtO3hSCyE0+OVVWggHRlz9A2PyqaaubAszyu1OnqMTMBEwDwYDVR0TAQH/BAUw
        AwEB/zAKBggqhkjOPQQDAgNIADBFAiEAyWvin3ZEWSVxFt4wL40baB7fPcb93dQ2
        X1T+3QEQjbcCIAVpSZ3hx6O5CVEyJbgN3jhynlH9Fio8FXBQf+AtK2NU
        -----END CERTIFICATE-----
        -----BEGIN CERTIFICATE-----
        MIICDzCCAbSgAwIBAgIUBB/cx0KfG3Uf/QangjrkUXPEF7EwCgYIKoZIzj0EAwIw
        HjEcMBoGA1UEAwwTU3ludGhldGljIFRlc3QgUm9vdDAeFw0yNjAxMDEwMDAwMDBa
        Fw0zNTEyMzAwMDAwMDBaMBgxFjAUBgNVBAMMDVN5bnRoZXRpYyBNaWQwWTATBgcq
        hkjOPQIBBggqhkjOPQMBBwNCAATQSaFOr7fm97ujNvenZMJ5Zz26n73UX0bbPfPj
        yl0XguOQPTQKhx2SrsNhgnwl2cpwAAy8BWafNiwVfJhUej6To4HVMIHSMA8GA1Ud
        EwEB/wQFMAMBAf8wgb4GCisGAQQB1nkCAREEga8wgawCAgGQCgEBAgIBkAoBAQQJ
        c3ludGhldGljBAAwDL+FPQgCBgGbdtqoADCBgKEFMQMCAQeiAwIBA6MEAgIBAKoD
        AgEBv4U+AwIBAL+FQEwwSgQgq6urq6urq6urq6urq6urq6urq6urq6urq6urq6ur
        q6sBAf8KAQAEIM3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nv4VBBQID
        AnEAv4VCBQIDAxdxMAoGCCqGSM49BAMCA0kAMEYCIQD0bTNRg/Soe5j748AuTJSs
        tkwcVwHDFpSAGMkwudivjgIhAPFOsTU+jSBfT091X2qBo+1PcILFAejsDaxp8BbD
        tyBZ
        -----END CERTIFICATE-----
        \(Self.root)
        """

    static let attestKeyOtherLevel = """
        -----BEGIN CERTIFICATE-----
        MIICBTCCAaugAwIBAgIUMEhq/GYeWs2X1kSNHfmPjtJAyp8wCgYIKoZIzj0EAwIw
        HzEdMBsGA1UEAwwUQW5kcm9pZCBLZXlzdG9yZSBLZXkwHhcNMjYwMTAxMDAwMDAw
        WhcNMzUxMjMwMDAwMDAwWjAfMR0wGwYDVQQDDBRBbmRyb2lkIEtleXN0b3JlIEtl
        eTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABOYAtn4oQ3n+pdQXR/XuCRRY8gul
        Q10A/m5CM3TmrVXLSK7pWqCgYXrZYpQTFS763a7fZcTKi/vJK/iap0PVHKKjgcQw
        gcEwgb4GCisGAQQB1nkCAREEga8wgawCAgGQCgEBAgIBkAoBAQQJc3ludGhldGlj
        BAAwDL+FPQgCBgGbdtqoADCBgKEFMQMCAQKiAwIBA6MEAgIBAKoDAgEBv4U+AwIB
        AL+FQEwwSgQgq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6sBAf8KAQAE
        IM3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nv4VBBQIDAnEAv4VCBQID
        AxdxMAoGCCqGSM49BAMCA0gAMEUCIChS22+cE0w9wc8f0xY2rcu7kVzV+FTGx82X
        TIovexImAiEA4uPfibttjvH1nRcezDU9IxKZikKXVQ8UiGjLmBNRaaA=
        -----END CERTIFICATE-----
        -----BEGIN CERTIFICATE-----
        MIICADCCAaagAwIBAgIUE6I7XnoBeusQklk8b1DyaWGwESgwCgYIKoZIzj0EAwIw
        GjEYMBYGA1UEAwwPU3ludGhldGljIEJhdGNoMB4XDTI2MDEwMTAwMDAwMFoXDTM1
        MTIzMDAwMDAwMFowHzEdMBsGA1UEAwwUQW5kcm9pZCBLZXlzdG9yZSBLZXkwWTAT
        BgcqhkjOPQIBBggqhkjOPQMBBwNCAAQiICHB2o0MRULbWjxHRHWJGOl80j5hWB2c
        O60Mr9BWHwuAyLXAJUsTAZSKAuIUs6iwTXe+jvw0rm/AP6hZAU72o4HEMIHBMIG+
        BgorBgEEAdZ5AgERBIGvMIGsAgIBkAoBAgICAZAKAQIECXN5bnRoZXRpYwQAMAy/
        hT0IAgYBm3baqAAwgYChBTEDAgEHogMCAQOjBAICAQCqAwIBAb+FPgMCAQC/hUBM
        MEoEIKurq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urAQH/CgEABCDNzc3N
        zc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzb+FQQUCAwJxAL+FQgUCAwMXcTAK
        BggqhkjOPQQDAgNIADBFAiEAkBg3PB7r6/SQAGoCAJFBNvpbYHswrFzgsrL7BikS
        7MwCIDn7e7g3TSZq9iijRiPuI2Kh/LRWCl3yrKIhcxy8G+Tf
        -----END CERTIFICATE-----
        \(Self.batch)
        \(Self.root)
        """

    static let attestKey = """
        -----BEGIN CERTIFICATE-----
        MIICBTCCAaugAwIBAgIUGb+U/s+wcwIZgOCRtoMzV0mUuDYwCgYIKoZIzj0EAwIw
        HzEdMBsGA1UEAwwUQW5kcm9pZCBLZXlzdG9yZSBLZXkwHhcNMjYwMTAxMDAwMDAw
        WhcNMzUxMjMwMDAwMDAwWjAfMR0wGwYDVQQDDBRBbmRyb2lkIEtleXN0b3JlIEtl
        eTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABOYAtn4oQ3n+pdQXR/XuCRRY8gul
        Q10A/m5CM3TmrVXLSK7pWqCgYXrZYpQTFS763a7fZcTKi/vJK/iap0PVHKKjgcQw
        gcEwgb4GCisGAQQB1nkCAREEga8wgawCAgGQCgEBAgIBkAoBAQQJc3ludGhldGlj
        BAAwDL+FPQgCBgGbdtqoADCBgKEFMQMCAQKiAwIBA6MEAgIBAKoDAgEBv4U+AwIB
        AL+FQEwwSgQgq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6sBAf8KAQAE
        IM3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nv4VBBQIDAnEAv4VCBQID
        AxdxMAoGCCqGSM49BAMCA0gAMEUCIFnqIw4NqmNoKYIvsgk+qg7duR/BXgNA9eeD
        drWJl5+UAiEArTDnH3x7eck55Js089zOY+pe1/mZGwSlXnRmr77qaig=
        -----END CERTIFICATE-----
        -----BEGIN CERTIFICATE-----
        MIICADCCAaagAwIBAgIUakaIzpBoyE16LCcQUElI5/JEbbswCgYIKoZIzj0EAwIw
        GjEYMBYGA1UEAwwPU3ludGhldGljIEJhdGNoMB4XDTI2MDEwMTAwMDAwMFoXDTM1
        MTIzMDAwMDAwMFowHzEdMBsGA1UEAwwUQW5kcm9pZCBLZXlzdG9yZSBLZXkwWTAT
        BgcqhkjOPQIBBggqhkjOPQMBBwNCAAQiICHB2o0MRULbWjxHRHWJGOl80j5hWB2c
        O60Mr9BWHwuAyLXAJUsTAZSKAuIUs6iwTXe+jvw0rm/AP6hZAU72o4HEMIHBMIG+
        BgorBgEEAdZ5AgERBIGvMIGsAgIBkAoBAQICAZAKAQEECXN5bnRoZXRpYwQAMAy/
        hT0IAgYBm3baqAAwgYChBTEDAgEHogMCAQOjBAICAQCqAwIBAb+FPgMCAQC/hUBM
        MEoEIKurq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urAQH/CgEABCDNzc3N
        zc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzb+FQQUCAwJxAL+FQgUCAwMXcTAK
        BggqhkjOPQQDAgNIADBFAiEAl4ic7LkpQbPuCCfSFcN8F/x50C5lEFZZTIcqscNG
        GRsCIDvjV8owsYB37PaZqbLVZp2ntlDzV8+zcOVfSSiVWv2c
        -----END CERTIFICATE-----
        \(Self.batch)
        \(Self.root)
        """

    static let noKeyDescription = """
        -----BEGIN CERTIFICATE-----
        MIIBODCB36ADAgECAhQ1rEVncu5MNAGRqTafDYbnZWrqkTAKBggqhkjOPQQDAjAa
        MRgwFgYDVQQDDA9TeW50aGV0aWMgQmF0Y2gwHhcNMjYwMTAxMDAwMDAwWhcNMzUx
        MjMwMDAwMDAwWjAfMR0wGwYDVQQDDBRBbmRyb2lkIEtleXN0b3JlIEtleTBZMBMG
        ByqGSM49AgEGCCqGSM49AwEHA0IABOYAtn4oQ3n+pdQXR/XuCRRY8gulQ10A/m5C
        M3TmrVXLSK7pWqCgYXrZYpQTFS763a7fZcTKi/vJK/iap0PVHKIwCgYIKoZIzj0E
        AwIDSAAwRQIgVFGQwkwggc2NjEFvSmWtH+7UgcltU7/Xyaswe+wzXBACIQDDXv+h
        zc0K2XpsQHj7O15Ltj+YofoB0AX+Ms32/XtOGQ==
        -----END CERTIFICATE-----
        \(Self.batch)
        \(Self.root)
        """

    static let rootWithKeyDescription = """
        -----BEGIN CERTIFICATE-----
        MIICCDCCAa2gAwIBAgIUbOeCMj8s0ac76/PvSt5dj8CamQ4wCgYIKoZIzj0EAwIw
        ITEfMB0GA1UEAwwWU3ludGhldGljIFRlc3QgUm9vdCBLRDAeFw0yNjAxMDEwMDAw
        MDBaFw0zNTEyMzAwMDAwMDBaMB8xHTAbBgNVBAMMFEFuZHJvaWQgS2V5c3RvcmUg
        S2V5MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE5gC2fihDef6l1BdH9e4JFFjy
        C6VDXQD+bkIzdOatVctIrulaoKBhetlilBMVLvrdrt9lxMqL+8kr+JqnQ9UcoqOB
        xDCBwTCBvgYKKwYBBAHWeQIBEQSBrzCBrAICAZAKAQECAgGQCgEBBAlzeW50aGV0
        aWMEADAMv4U9CAIGAZt22qgAMIGAoQUxAwIBAqIDAgEDowQCAgEAqgMCAQG/hT4D
        AgEAv4VATDBKBCCrq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urqwEB/woB
        AAQgzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc2/hUEFAgMCcQC/hUIF
        AgMDF3EwCgYIKoZIzj0EAwIDSQAwRgIhAJR/vvmKRyu0lKajO8uklNcrIDkUAMs9
        zIs/MkP7JsDEAiEAnCsYJMbfUmqsb0y2ML5JSBbJs/KA7jRGxqOHvuj75M0=
        -----END CERTIFICATE-----
        -----BEGIN CERTIFICATE-----
        MIIB9jCCAZygAwIBAgIBBzAKBggqhkjOPQQDAjAhMR8wHQYDVQQDDBZTeW50aGV0
        aWMgVGVzdCBSb290IEtEMB4XDTI2MDEwMTAwMDAwMFoXDTM1MTIzMDAwMDAwMFow
        ITEfMB0GA1UEAwwWU3ludGhldGljIFRlc3QgUm9vdCBLRDBZMBMGByqGSM49AgEG
        CCqGSM49AwEHA0IABH8kwJvnOBYByrZOk7RaZFDf2Xi/VaIfsk2ju8uBmk/DKeOG
        B4EXm3b5x6nzu38X8N2TVPw62NVX9ATtFDZCMBOjgcQwgcEwgb4GCisGAQQB1nkC
        AREEga8wgawCAgGQCgEBAgIBkAoBAQQJc3ludGhldGljBAAwDL+FPQgCBgGbdtqo
        ADCBgKEFMQMCAQeiAwIBA6MEAgIBAKoDAgEBv4U+AwIBAL+FQEwwSgQgq6urq6ur
        q6urq6urq6urq6urq6urq6urq6urq6urq6sBAf8KAQAEIM3Nzc3Nzc3Nzc3Nzc3N
        zc3Nzc3Nzc3Nzc3Nzc3Nzc3Nv4VBBQIDAnEAv4VCBQIDAxdxMAoGCCqGSM49BAMC
        A0gAMEUCIQC6Vmcl/kauhDPfS81Eqvi2MwJ1ftkp7Fs6nO77ynQC+AIgRQceN3QK
        EkZv00msYglvc47UYaA+pSUiQMW0FS+XCkc=
        -----END CERTIFICATE-----
        """

}
