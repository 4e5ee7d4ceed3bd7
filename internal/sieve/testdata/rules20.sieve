require ["fileinto", "imap4flags", "envelope", "subaddress"];
# 20 rules of the kinds users write (list and sender sorting, subject
# keywords, flags). None matches the benchmarks' messages, so every test
# runs and the implicit keep files the message.
if header :contains "list-id" "list0.example.org" { fileinto "Lists/l0"; stop; }
if address :domain :is "from" "sender0.example" { fileinto "Senders/s0"; stop; }
if header :matches "subject" "*[project-0]*" { addflag "$Project0"; fileinto "Projects"; stop; }
if anyof (envelope :detail "to" "tag0", header :contains "to" "team0@example.com") { addflag "\\Flagged"; }
if header :contains "list-id" "list1.example.org" { fileinto "Lists/l1"; stop; }
if address :domain :is "from" "sender1.example" { fileinto "Senders/s1"; stop; }
if header :matches "subject" "*[project-1]*" { addflag "$Project1"; fileinto "Projects"; stop; }
if anyof (envelope :detail "to" "tag1", header :contains "to" "team1@example.com") { addflag "\\Flagged"; }
if header :contains "list-id" "list2.example.org" { fileinto "Lists/l2"; stop; }
if address :domain :is "from" "sender2.example" { fileinto "Senders/s2"; stop; }
if header :matches "subject" "*[project-2]*" { addflag "$Project2"; fileinto "Projects"; stop; }
if anyof (envelope :detail "to" "tag2", header :contains "to" "team2@example.com") { addflag "\\Flagged"; }
if header :contains "list-id" "list3.example.org" { fileinto "Lists/l3"; stop; }
if address :domain :is "from" "sender3.example" { fileinto "Senders/s3"; stop; }
if header :matches "subject" "*[project-3]*" { addflag "$Project3"; fileinto "Projects"; stop; }
if anyof (envelope :detail "to" "tag3", header :contains "to" "team3@example.com") { addflag "\\Flagged"; }
if header :contains "list-id" "list4.example.org" { fileinto "Lists/l4"; stop; }
if address :domain :is "from" "sender4.example" { fileinto "Senders/s4"; stop; }
if header :matches "subject" "*[project-4]*" { addflag "$Project4"; fileinto "Projects"; stop; }
if anyof (envelope :detail "to" "tag4", header :contains "to" "team4@example.com") { addflag "\\Flagged"; }
